"""The models faceweave knows, as :class:`ModelSpec` values.

Sources: FaceFusion's model sets (``facefusion/processors/modules/*/core.py``,
``facefusion/face_recognizer.py``) for the download locations, licences,
templates, crop sizes and mean/std, and its pre/post-processing for the
input/output names and shapes.  FaceFusion hosts the files as GitHub release
assets ``facefusion/facefusion-assets`` (tag ``models-3.x.0``) and mirrors them
on Hugging Face (``facefusion/models-3.x.0``).

What is pinned and what is not:

* ``sha256`` is set only where the file's hash is known here: NudeNet's
  ``320n.onnx`` (hashed from the ``nudenet`` 3.4.2 wheel).  FaceFusion
  publishes CRC32 ``.hash`` files, not sha256, so its models are not pinned;
  a download checks the published CRC32 and records the sha256 it got, and
  ``models import`` pins the user's (see :mod:`faceweave.models.facefusion`).
* Tensor names are left ``None`` (matched by position) where FaceFusion
  reads the graph's outputs by position (``run(None, ...)[0]``) and the name
  is not known; batch dimensions are left open, since exports differ.

Long because the catalog is data: one spec per model, in tables.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from types import MappingProxyType

from faceweave.errors import UnknownModelError
from faceweave.models.spec import ModelSpec, TensorSpec
from faceweave.names import (
    AGE_MODIFIERS,
    BACKGROUND_REMOVERS,
    FRAME_COLORIZERS,
    LIP_SYNCERS,
    LIVE_PORTRAIT,
    VOICE_EXTRACTORS,
)

_GITHUB = "https://github.com/facefusion/facefusion-assets/releases/download/{tag}/{file}"
_HUGGINGFACE = "https://huggingface.co/facefusion/{tag}/resolve/main/{file}"

NON_COMMERCIAL = "Non-Commercial"

_HALF = (0.5, 0.5, 0.5)
_ZERO = (0.0, 0.0, 0.0)
_ONE = (1.0, 1.0, 1.0)


#: the frame enhancers' upscale factor and FaceFusion's tile side (pixels of input)
FRAME_ENHANCER_TILING: Mapping[str, tuple[int, int]] = MappingProxyType(
    {
        **{f"real_esrgan_x{scale}{fp}": (scale, 256) for scale in (2, 4, 8) for fp in ("", "_fp16")},
        "clear_reality_x4": (4, 128),
        "face_dat_x4": (4, 128),
        "nomos8k_sc_x4": (4, 128),
        "real_hatgan_x4": (4, 256),
        "real_web_photo_x4": (4, 64),
        "realistic_rescaler_x4": (4, 128),
        "remacri_x4": (4, 128),
        "siax_x4": (4, 128),
        "span_kendata_x4": (4, 128),
        "swin2_sr_x4": (4, 128),
        "tghq_face_x8": (8, 128),
        "ultra_sharp_x4": (4, 128),
        "ultra_sharp_2_x4": (4, 1024),
    }
)


def facefusion_urls(tag: str, file: str) -> tuple[str, ...]:
    """FaceFusion's GitHub release asset, then its Hugging Face mirror."""
    if tag == "models":  # the 2.x assets, which were never mirrored
        return (_GITHUB.format(tag=tag, file=file),)
    return (_GITHUB.format(tag=tag, file=file), _HUGGINGFACE.format(tag=tag, file=file))


def _image(name: str | None, size: int | None, dtype: str | None = "float32") -> TensorSpec:
    """``[batch, 3, size, size]`` (``size`` ``None``: height and width open)."""
    if size is None:
        return TensorSpec(name, (None, 3, "height", "width"), dtype)
    return TensorSpec(name, (None, 3, size, size), dtype)


def _embedding(name: str | None) -> TensorSpec:
    return TensorSpec(name, (None, 512), "float32")


def _swapper(
    name: str,
    *,
    tag: str,
    licence: str,
    vendor: str,
    template: str,
    size: int,
    mean: tuple[float, float, float],
    std: tuple[float, float, float],
    source: TensorSpec,
    output: str | None = None,
    extra_outputs: tuple[TensorSpec, ...] = (),
    notes: str = "",
    sha256: str | None = None,
    file_size: int | None = None,
    converter: str | None = None,
) -> ModelSpec:
    needs = () if source.shape is None or len(source.shape) != 2 else ("arcface_w600k_r50",)
    return ModelSpec(
        name=name,
        kind="swapper",
        file_name=f"{name}.onnx",
        licence=licence,
        vendor=vendor,
        inputs=(_image("target", size), source),
        outputs=(_image(output, size), *extra_outputs),
        urls=facefusion_urls(tag, f"{name}.onnx"),
        template=template,
        crop_size=size,
        mean=mean,
        std=std,
        notes=notes,
        sha256=sha256,
        size=file_size,
        requires=needs + ((converter,) if converter else ()),
    )


def _swappers() -> list[ModelSpec]:
    inswapper_note = (
        "InsightFace's original inswapper_128.onnx has sha256 "
        "e4a3f08c753cb72d04e10aa0f7dbe3deebbf39567d4ead6dce08e98aa49e16af"
        " (554,253,681 bytes); FaceFusion's copy is not confirmed to be byte-identical, so it is not pinned."
        " The source input takes the ArcFace embedding projected through the graph's last initializer (emap)."
    )
    ghost_note = "source: ArcFace embedding converted by arcface_converter_ghost (or crossface_ghost)"
    simswap_note = "source: ArcFace embedding converted by arcface_converter_simswap (or crossface_simswap)"
    specs = [
        _swapper(
            "inswapper_128",
            tag="models-3.0.0",
            licence=NON_COMMERCIAL,
            vendor="InsightFace",
            template="arcface_128",
            size=128,
            mean=_ZERO,
            std=_ONE,
            source=_embedding("source"),
            output="output",
            notes=inswapper_note,
        ),
        _swapper(
            "inswapper_128_fp16",
            tag="models-3.0.0",
            licence=NON_COMMERCIAL,
            vendor="InsightFace",
            template="arcface_128",
            size=128,
            mean=_ZERO,
            std=_ONE,
            source=_embedding("source"),
            output="output",
            notes="float16 weights, float32 inputs/outputs",
        ),
        _swapper(
            "simswap_256",
            tag="models-3.0.0",
            licence=NON_COMMERCIAL,
            vendor="neuralchen",
            template="arcface_112_v1",
            size=256,
            mean=(0.485, 0.456, 0.406),
            std=(0.229, 0.224, 0.225),
            source=_embedding("source"),
            notes=simswap_note,
            converter="crossface_simswap",
        ),
        _swapper(
            "simswap_unofficial_512",
            tag="models-3.0.0",
            licence=NON_COMMERCIAL,
            vendor="neuralchen",
            template="arcface_112_v1",
            size=512,
            mean=_ZERO,
            std=_ONE,
            source=_embedding("source"),
            notes=simswap_note,
            converter="crossface_simswap",
        ),
        _swapper(
            "blendswap_256",
            tag="models-3.0.0",
            licence=NON_COMMERCIAL,
            vendor="mapooon",
            template="ffhq_512",
            size=256,
            mean=_ZERO,
            std=_ONE,
            source=_image("source", 112),
            notes="source: the source face aligned to arcface_112_v2 at 112 px, RGB in [0, 1]",
        ),
        _swapper(
            "uniface_256",
            tag="models-3.0.0",
            licence="Unknown",
            vendor="xc-csc101",
            template="ffhq_512",
            size=256,
            mean=_HALF,
            std=_HALF,
            source=_image("source", 256),
            notes="source: the source face aligned to ffhq_512 at 256 px, RGB in [0, 1]",
        ),
    ]
    for variant in ("1a", "1b", "1c"):
        specs.append(
            _swapper(
                f"hyperswap_{variant}_256",
                tag="models-3.3.0",
                licence="ResearchRAIL",
                vendor="FaceFusion",
                template="arcface_128",
                size=256,
                mean=_HALF,
                std=_HALF,
                source=_embedding("source"),
                extra_outputs=(TensorSpec("mask", (None, 1, 256, 256), "float32"),),
                notes="source: the normalised ArcFace (w600k_r50) embedding; second output `mask`, the model's "
                "own face mask (FaceFusion 3.x reads only the first output); float16 weights, float32 "
                "inputs/outputs",
            )
        )
    specs.append(
        _swapper(
            "hififace_unofficial_256",
            tag="models-3.1.0",
            licence="Unknown",
            vendor="GuijiAI",
            template="mtcnn_512",
            size=256,
            mean=_HALF,
            std=_HALF,
            source=_embedding("source"),
            notes="source: ArcFace embedding converted by crossface_hififace, then L2-normalised",
            converter="crossface_hififace",
        )
    )
    for version in (1, 2, 3):
        specs.append(
            _swapper(
                f"ghost_{version}_256",
                tag="models-3.0.0",
                licence="Apache-2.0",
                vendor="ai-forever",
                template="arcface_112_v1",
                size=256,
                mean=_HALF,
                std=_HALF,
                source=_embedding("source"),
                notes=ghost_note,
                converter="crossface_ghost",
            )
        )
    return specs


def _embedders() -> list[ModelSpec]:
    def arcface(
        name: str,
        tag: str,
        template: str,
        input_name: str | None,
        notes: str,
        *,
        licence: str = NON_COMMERCIAL,
        vendor: str = "InsightFace",
    ) -> ModelSpec:
        return ModelSpec(
            name=name,
            kind="embedder",
            file_name=f"{name}.onnx",
            licence=licence,
            vendor=vendor,
            inputs=(_image(input_name, 112),),
            outputs=(_embedding(None),),
            urls=facefusion_urls(tag, f"{name}.onnx"),
            template=template,
            crop_size=112,
            mean=_HALF,
            std=_HALF,
            notes=notes,
        )

    def converter(name: str, tag: str, vendor: str) -> ModelSpec:
        return ModelSpec(
            name=name,
            kind="embedder",
            file_name=f"{name}.onnx",
            licence="Unknown",
            vendor=vendor,
            inputs=(_embedding("input"),),
            outputs=(_embedding(None),),
            urls=facefusion_urls(tag, f"{name}.onnx"),
            notes="embedding converter: maps a w600k_r50 ArcFace embedding to the swapper's own embedding space",
        )

    return [
        arcface(
            "arcface_w600k_r50",
            "models-3.0.0",
            "arcface_112_v2",
            None,
            "the ArcFace used by inswapper and hyperswap; embeddings of RGB crops scaled to [-1, 1]",
        ),
        arcface(
            "arcface_simswap",
            "models",
            "arcface_112_v1",
            None,
            "FaceFusion 2.x asset: SimSwap's own ArcFace",
            vendor="neuralchen",
        ),
        arcface(
            "arcface_ghost",
            "models",
            "arcface_112_v1",
            None,
            "FaceFusion 2.x asset: Ghost's own ArcFace",
            licence="Apache-2.0",
            vendor="ai-forever",
        ),
        converter("arcface_converter_simswap", "models-3.0.0", "FaceFusion"),
        converter("arcface_converter_ghost", "models-3.0.0", "FaceFusion"),
        converter("crossface_simswap", "models-3.4.0", "FaceFusion"),
        converter("crossface_ghost", "models-3.4.0", "FaceFusion"),
        converter("crossface_hififace", "models-3.4.0", "FaceFusion"),
    ]


def _enhancers() -> list[ModelSpec]:
    def face(
        name: str, licence: str, vendor: str, *, size: int = 512, template: str = "ffhq_512", weight: bool = False
    ) -> ModelSpec:
        inputs: tuple[TensorSpec, ...] = (_image("input", size),)
        if weight:
            inputs += (TensorSpec("weight", (1,), "float64"),)
        return ModelSpec(
            name=name,
            kind="face_enhancer",
            file_name=f"{name}.onnx",
            licence=licence,
            vendor=vendor,
            inputs=inputs,
            outputs=(_image(None, size),),
            urls=facefusion_urls("models-3.0.0", f"{name}.onnx"),
            template=template,
            crop_size=size,
            mean=_HALF,
            std=_HALF,
            notes="fidelity weight input (float64, [1])" if weight else "",
        )

    def frame(
        name: str,
        scale: int,
        licence: str = "BSD-3-Clause",
        vendor: str = "xinntao",
        tag: str = "models-3.0.0",
        tile: int = 256,
    ) -> ModelSpec:
        precision = "; float16 weights, float32 inputs/outputs (FaceFusion feeds float32)" if "fp16" in name else ""
        return ModelSpec(
            name=name,
            kind="frame_enhancer",
            file_name=f"{name}.onnx",
            licence=licence,
            vendor=vendor,
            inputs=(_image("input", None),),
            outputs=(TensorSpec(None, (None, 3, None, None), "float32"),),
            urls=facefusion_urls(tag, f"{name}.onnx"),
            mean=_ZERO,
            std=_ONE,
            warmup_dims=(("height", tile), ("width", tile)),
            notes=f"x{scale} upscale of RGB tiles in [0, 1]; FaceFusion tiles at {tile} px with {tile // 16} px "
            f"padding, {tile // 32} px overlap{precision}",
        )

    #: FaceFusion 3.x's other frame enhancers: name -> (licence, vendor, release tag) as FaceFusion declares them
    others = {
        "clear_reality_x4": (NON_COMMERCIAL, "Kim2091", "models-3.0.0"),
        "face_dat_x4": ("CC-BY-4.0", "Helaman", "models-3.5.0"),
        "nomos8k_sc_x4": ("CC-BY-4.0", "Phhofm", "models-3.0.0"),
        "real_hatgan_x4": ("Apache-2.0", "XPixelGroup", "models-3.0.0"),
        "real_web_photo_x4": ("CC-BY-4.0", "Helaman", "models-3.1.0"),
        "realistic_rescaler_x4": ("WTFPL", "Mutin Choler", "models-3.1.0"),
        "remacri_x4": (NON_COMMERCIAL, "FoolhardyVEVO", "models-3.1.0"),
        "siax_x4": ("WTFPL", "NMKD", "models-3.1.0"),
        "span_kendata_x4": (NON_COMMERCIAL, "terrainer", "models-3.0.0"),
        "swin2_sr_x4": ("Apache-2.0", "mv-lab", "models-3.1.0"),
        "tghq_face_x8": ("GPL-3.0", "TorrentGuy", "models-3.5.0"),
        "ultra_sharp_x4": (NON_COMMERCIAL, "Kim2091", "models-3.0.0"),
        "ultra_sharp_2_x4": (NON_COMMERCIAL, "Kim2091", "models-3.3.0"),
    }
    return [
        face("gfpgan_1.2", "Apache-2.0", "TencentARC"),
        face("gfpgan_1.3", "Apache-2.0", "TencentARC"),
        face("gfpgan_1.4", "Apache-2.0", "TencentARC"),
        face("codeformer", "S-Lab-1.0", "sczhou", weight=True),
        face("gpen_bfr_256", NON_COMMERCIAL, "yangxy", size=256, template="arcface_128"),
        face("gpen_bfr_512", NON_COMMERCIAL, "yangxy"),
        face("gpen_bfr_1024", NON_COMMERCIAL, "yangxy", size=1024),
        face("gpen_bfr_2048", NON_COMMERCIAL, "yangxy", size=2048),
        face("restoreformer_plus_plus", "Apache-2.0", "wzhouxiff"),
        *(frame(f"real_esrgan_x{scale}{suffix}", scale) for scale in (2, 4, 8) for suffix in ("", "_fp16")),
        *(
            frame(name, FRAME_ENHANCER_TILING[name][0], *facts, tile=FRAME_ENHANCER_TILING[name][1])
            for name, facts in others.items()
        ),
    ]


def _colorizers() -> list[ModelSpec]:
    """FaceFusion's frame colorizers: a grey frame in, its colour out, at a
    square side FaceFusion lets the user choose (``FRAME_COLORIZER_SIZES``)."""
    facts = {"ddcolor": ("Apache-2.0", "piddnad"), "deoldify": ("MIT", "jantic")}
    specs = []
    for name, family in FRAME_COLORIZERS.items():
        licence, vendor = facts[family]
        channels = 2 if family == "ddcolor" else 3
        what = (
            "the L of CIELAB (as RGB in [0, 1]) in, its a and b out"
            if family == "ddcolor"
            else "grey RGB in 0-255 in, RGB out"
        )
        specs.append(
            ModelSpec(
                name=name,
                kind="frame_colorizer",
                file_name=f"{name}.onnx",
                licence=licence,
                vendor=vendor,
                inputs=(_image("input", None),),
                outputs=(TensorSpec(None, (None, channels, None, None), "float32"),),
                urls=facefusion_urls("models-3.0.0", f"{name}.onnx"),
                warmup_dims=(("height", 256), ("width", 256)),
                notes=f"{what}; FaceFusion runs it at 256x256 by default (192, 256, 384 or 512)",
            )
        )
    return specs


#: FaceFusion 3.8.1's background removers: name -> (side, mean, std, licence, vendor, release tag)
_IMAGENET = ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))
_BACKGROUND: Mapping[str, tuple[int, tuple[float, float, float], tuple[float, float, float], str, str, str]] = (
    MappingProxyType(
        {
            "ben_2": (1024, _ZERO, _ONE, "MIT", "PramaLLC", "models-3.5.0"),
            "birefnet_general": (1024, _ZERO, _ONE, "MIT", "ZhengPeng7", "models-3.5.0"),
            "birefnet_portrait": (1024, _ZERO, _ONE, "MIT", "ZhengPeng7", "models-3.5.0"),
            "corridor_key_1024": (1024, *_IMAGENET, NON_COMMERCIAL, "nikopueringer", "models-3.6.0"),
            "corridor_key_2048": (2048, *_IMAGENET, NON_COMMERCIAL, "nikopueringer", "models-3.6.0"),
            "isnet_general": (1024, _HALF, _ONE, "Apache-2.0", "xuebinqin", "models-3.5.0"),
            "modnet": (512, _HALF, _HALF, "Apache-2.0", "ZHKKKe", "models-3.5.0"),
            "ormbg": (1024, _ZERO, _ONE, "Apache-2.0", "schirrmacher", "models-3.5.0"),
            "rmbg_1.4": (1024, _HALF, _ONE, NON_COMMERCIAL, "Bria", "models-3.5.0"),
            "rmbg_2.0": (1024, *_IMAGENET, NON_COMMERCIAL, "Bria", "models-3.5.0"),
            "silueta": (320, *_IMAGENET, "Apache-2.0", "Kikedao", "models-3.5.0"),
            "u2net_cloth": (768, *_IMAGENET, "MIT", "levindabhi", "models-3.5.0"),
            "u2net_general": (320, *_IMAGENET, "Apache-2.0", "xuebinqin", "models-3.5.0"),
            "u2net_human": (320, *_IMAGENET, "Apache-2.0", "xuebinqin", "models-3.5.0"),
            "u2netp": (320, *_IMAGENET, "Apache-2.0", "xuebinqin", "models-3.5.0"),
        }
    )
)


def _background_removers() -> list[ModelSpec]:
    """FaceFusion's background removers: the frame at the model's side in,
    the foreground's mask out (u2net_cloth: a class per pixel; corridor_key
    also takes a coarse green-screen mask and gives the keyed frame)."""
    specs = []
    for name, family in BACKGROUND_REMOVERS.items():
        side, mean, std, licence, vendor, tag = _BACKGROUND[name]
        channels = 4 if family == "corridor_key" else 3
        inputs = (TensorSpec("input", (None, channels, "height", "width"), "float32"),)
        mask = TensorSpec(None, (None, None, "height", "width"), "float32")
        outputs = (
            (mask, TensorSpec(None, (None, 3, "height", "width"), "float32")) if family == "corridor_key" else (mask,)
        )
        what = {
            "u2net_cloth": "a score per class and pixel (the class taken: 0 the background)",
            "corridor_key": "the mask and the keyed frame (RGB in [0, 1]); the input adds a coarse green-screen mask",
        }.get(family, "the foreground's mask in [0, 1]")
        specs.append(
            ModelSpec(
                name=name,
                kind="background_remover",
                file_name=f"{name}.onnx",
                licence=licence,
                vendor=vendor,
                inputs=inputs,
                outputs=outputs,
                urls=facefusion_urls(tag, f"{name}.onnx"),
                crop_size=side,
                mean=mean,
                std=std,
                warmup_dims=(("height", side), ("width", side)),
                notes=f"RGB at {side}x{side}, (x / 255 - mean) / std; out: {what}",
            )
        )
    return specs


#: FaceFusion 3.8.1's lip syncers and voice extractors: name -> (licence, vendor, release tag)
_SPEECH: Mapping[str, tuple[str, str, str]] = MappingProxyType(
    {
        "edtalk_256": ("Apache-2.0", "tanshuai0219", "models-3.3.0"),
        "wav2lip_96": (NON_COMMERCIAL, "Rudrabha", "models-3.0.0"),
        "wav2lip_gan_96": (NON_COMMERCIAL, "Rudrabha", "models-3.0.0"),
        "kim_vocal_1": (NON_COMMERCIAL, "KimberleyJensen", "models-3.4.0"),
        "kim_vocal_2": (NON_COMMERCIAL, "KimberleyJensen", "models-3.0.0"),
        "uvr_mdxnet": ("MIT", "Anjok07", "models-3.4.0"),
    }
)
_MEL = TensorSpec("source", (None, 1, 80, 16), "float32")


def _lip_syncers() -> list[ModelSpec]:
    """FaceFusion's lip syncers: a frame's mel window and the face in, the
    face with its mouth moved out (Wav2Lip: the lower face at 96 px, given
    twice, its lower half blanked the first time; EDTalk: the aligned face at
    256 px and a weight)."""
    specs = []
    for name, family in LIP_SYNCERS.items():
        licence, vendor, tag = _SPEECH[name]
        if family == "wav2lip":
            inputs: tuple[TensorSpec, ...] = (_MEL, TensorSpec("target", (None, 6, 96, 96), "float32"))
            size, notes = 96, "BGR in [0, 1], the face's lower half blanked then whole (6 channels); out: BGR"
        else:
            inputs = (_MEL, _image("target", 256), TensorSpec("weight", (1,), "float32"))
            size, notes = 256, "RGB in [0, 1] of the ffhq_512 crop resized; out: RGB; weight: the lip syncer weight"
        specs.append(
            ModelSpec(
                name=name,
                kind="lip_syncer",
                file_name=f"{name}.onnx",
                licence=licence,
                vendor=vendor,
                inputs=inputs,
                outputs=(_image(None, size),),
                urls=facefusion_urls(tag, f"{name}.onnx"),
                crop_size=size,
                notes=f"mel window [1, 1, 80, 16] as FaceFusion's audio.py; {notes}",
            )
        )
    return specs


def _voice_extractors() -> list[ModelSpec]:
    """FaceFusion's voice extractors (MDX-Net): the STFT of a stereo piece in, the voice's out."""
    specs = []
    for name in VOICE_EXTRACTORS:
        licence, vendor, tag = _SPEECH[name]
        spec = TensorSpec("input", (None, 4, 3072, 256), "float32")
        specs.append(
            ModelSpec(
                name=name,
                kind="voice_extractor",
                file_name=f"{name}.onnx",
                licence=licence,
                vendor=vendor,
                inputs=(spec,),
                outputs=(TensorSpec(None, (None, 4, 3072, 256), "float32"),),
                urls=facefusion_urls(tag, f"{name}.onnx"),
                notes="real and imaginary STFT of both channels (7680 samples, hop 1024, 3072 bins) in and out",
            )
        )
    return specs


def _age_modifiers() -> list[ModelSpec]:
    """FaceFusion's age modifiers and the face classifier FRAN's age comes from."""
    direction = TensorSpec("direction", None, "float32")
    fran = ModelSpec(
        name="fran",
        kind="age_modifier",
        file_name="fran.onnx",
        licence="MIT",
        vendor="ry-lu",
        inputs=(_image("target", 1024), direction),
        outputs=(_image(None, 1024),),
        urls=facefusion_urls("models-3.6.0", "fran.onnx"),
        template="ffhq_512",
        crop_size=1024,
        mean=_ZERO,
        std=_ONE,
        requires=("fairface",),
        notes="RGB in [0, 1] of the ffhq_512 crop; direction [2]: the face's age and the age wanted, over 100",
    )
    styleganex = ModelSpec(
        name="styleganex_age",
        kind="age_modifier",
        file_name="styleganex_age.onnx",
        licence="S-Lab-1.0",
        vendor="williamyang1991",
        inputs=(_image("target", 256), _image("target_with_background", 384), direction),
        outputs=(_image(None, None),),
        urls=facefusion_urls("models-3.1.0", "styleganex_age.onnx"),
        template="ffhq_512",
        crop_size=256,
        mean=_HALF,
        std=_HALF,
        notes="RGB in [-1, 1]: the ffhq_512 crop at 256 and the styleganex_384 crop at 384 (the head with its "
        "surroundings); direction: the age change mapped from [-100, 100] to [2.5, -2.5]; out: the 384 crop, larger",
    )
    fairface = ModelSpec(
        name="fairface",
        kind="face_classifier",
        file_name="fairface.onnx",
        licence="CC-BY-4.0",
        vendor="dchen236",
        inputs=(_image("input", 224),),
        outputs=tuple(TensorSpec(None, None, None) for _ in range(3)),
        urls=facefusion_urls("models-3.0.0", "fairface.onnx"),
        template="arcface_112_v2",
        crop_size=224,
        mean=_IMAGENET[0],
        std=_IMAGENET[1],
        notes="race, gender and age class of the arcface_112_v2 crop at 224 (the age classes 0-2, 3-9, 10-19, ... 70+)",
    )
    return [{"fran": fran, "styleganex_age": styleganex}[name] for name in AGE_MODIFIERS] + [fairface]


def _live_portrait() -> list[ModelSpec]:
    """LivePortrait's models as FaceFusion exports them (``models-3.0.0``), which its expression restorer
    (three of them) and its face editor run."""
    motion = ("pitch", "yaw", "roll", "scale", "translation", "expression", "motion_points")
    parts = {
        "feature_extractor": (
            (_image("input", 256),),
            (TensorSpec(None, (None, 32, 16, 64, 64), "float32"),),
            "RGB in [0, 1] at 256 in; the face's feature volume [1, 32, 16, 64, 64] out",
        ),
        "motion_extractor": (
            (_image("input", 256),),
            tuple(TensorSpec(None, None, "float32") for _ in motion),
            "RGB in [0, 1] at 256 in; pitch, yaw, roll (degrees), scale, translation, expression [1, 21, 3] and "
            "the canonical key points [1, 21, 3] out",
        ),
        "eye_retargeter": (
            (TensorSpec("input", (None, 66), "float32"),),
            (TensorSpec(None, (None, 63), "float32"),),
            "the key points and both eyes' and the wanted opening in; the key points' shift out",
        ),
        "lip_retargeter": (
            (TensorSpec("input", (None, 65), "float32"),),
            (TensorSpec(None, (None, 63), "float32"),),
            "the key points and the lips' and the wanted opening in; the key points' shift out",
        ),
        "stitcher": (
            (TensorSpec("source", (None, 21, 3), "float32"), TensorSpec("target", (None, 21, 3), "float32")),
            (TensorSpec(None, (None, 21, 3), "float32"),),
            "the edited and the original key points in; the edited ones stitched to the head out",
        ),
        "generator": (
            (
                TensorSpec("feature_volume", (None, 32, 16, 64, 64), "float32"),
                TensorSpec("source", (None, 21, 3), "float32"),
                TensorSpec("target", (None, 21, 3), "float32"),
            ),
            (_image(None, 512),),
            "the feature volume and the key points to move from (target) and to (source) in; RGB in [0, 1] at 512",
        ),
    }
    specs = []
    for part, name in LIVE_PORTRAIT.items():
        inputs, outputs, notes = parts[part]
        specs.append(
            ModelSpec(
                name=name,
                kind="live_portrait",
                file_name=f"{name}.onnx",
                licence="MIT",
                vendor="KwaiVGI",
                inputs=inputs,
                outputs=outputs,
                urls=facefusion_urls("models-3.0.0", f"{name}.onnx"),
                template="arcface_128",
                crop_size=512,
                notes=notes,
            )
        )
    return specs


def _deep_swappers() -> list[ModelSpec]:
    """DeepFaceLive's DFM models as FaceFusion offers them (each trained on one person)."""
    from faceweave.models.deepfacelive import DEEP_SWAPPERS, catalog_name, model_side

    specs = []
    for model_id in DEEP_SWAPPERS:
        scope, file = model_id.split("/")
        side = model_side(model_id)
        mask = TensorSpec(None, (None, side, side, 1), "float32")
        specs.append(
            ModelSpec(
                name=catalog_name(model_id),
                kind="deep_swapper",
                file_name=f"{catalog_name(model_id)}.dfm",
                licence="unstated",
                vendor=scope,
                inputs=(
                    TensorSpec("in_face:0", (None, side, side, 3), "float32"),
                    TensorSpec("morph_value:0", (1,), "float32", optional=True),
                ),
                outputs=(mask, TensorSpec(None, (None, side, side, 3), "float32"), mask),
                urls=(f"https://huggingface.co/facefusion/deepfacelive-models-{scope}/resolve/main/{file}.dfm",),
                template="dfl_whole_face",
                crop_size=side,
                notes=f"FaceFusion's deep swapper {model_id}: BGR in [0, 1] (NHWC, sharpened) and the morph in; the "
                "target's mask, the face and the source's mask out",
            )
        )
    return specs


def _classifiers() -> list[ModelSpec]:
    return [
        ModelSpec(
            name="nudenet_320n",
            kind="content_classifier",
            file_name="320n.onnx",
            licence="MIT",
            vendor="notAI-tech",
            bundled=("nudenet", "320n.onnx"),
            sha256="c15d8273adad2d0a92f014cc69ab2d6c311a06777a55545f2c4eb46f51911f0f",
            size=12_150_158,
            inputs=(TensorSpec("images", ("batch", 3, "height", "width"), "float32"),),
            outputs=(TensorSpec("output0", ("batch", 22, None), "float32"),),
            crop_size=320,
            mean=_ZERO,
            std=_ONE,
            warmup_dims=(("height", 320), ("width", 320)),
            notes="YOLOv8n detector shipped inside the nudenet wheel (3.4.2 hashed); 18 classes + 4 box values",
        ),
    ]


def _face_maskers() -> list[ModelSpec]:
    """FaceFusion's occluders (DeepFaceLab's XSeg: BGR ``[0, 1]`` crops, NHWC,
    one mask channel where the face shows) and face parsers (BiSeNet: RGB
    crops normalised with ImageNet's mean/std, NCHW, 19 class logits), as
    ``facefusion/face_masker.py`` feeds them; the files are read by position
    (``run(None, {'input': ...})[0]``), so output names are not pinned."""

    def occluder(name: str, tag: str) -> ModelSpec:
        return ModelSpec(
            name=name,
            kind="face_occluder",
            file_name=f"{name}.onnx",
            licence="GPL-3.0",
            vendor="DeepFaceLab",
            inputs=(TensorSpec("input", (None, 256, 256, 3), "float32"),),
            outputs=(TensorSpec(None, (None, 256, 256, 1), "float32"),),
            urls=facefusion_urls(tag, f"{name}.onnx"),
            crop_size=256,
            mean=_ZERO,
            std=_ONE,
            notes="input: the swapper's template crop resized to 256, BGR in [0, 1], NHWC; output: 1 where the face "
            "shows",
        )

    def parser(name: str, tag: str) -> ModelSpec:
        return ModelSpec(
            name=name,
            kind="face_parser",
            file_name=f"{name}.onnx",
            licence="MIT",
            vendor="yakhyo",
            inputs=(_image("input", 512),),
            outputs=(TensorSpec(None, (None, 19, 512, 512), "float32"),),
            urls=facefusion_urls(tag, f"{name}.onnx"),
            crop_size=512,
            mean=(0.485, 0.456, 0.406),
            std=(0.229, 0.224, 0.225),
            notes="input: the swapped template crop resized to 512, RGB normalised, NCHW; output: 19 CelebAMask-HQ "
            "class logits (argmax per pixel)",
        )

    return [
        occluder("xseg_1", "models-3.1.0"),
        occluder("xseg_2", "models-3.1.0"),
        occluder("xseg_3", "models-3.2.0"),
        parser("bisenet_resnet_18", "models-3.1.0"),
        parser("bisenet_resnet_34", "models-3.0.0"),
    ]


def _face_analysers() -> list[ModelSpec]:
    """FaceFusion's face detectors and landmarkers, as ``facefusion/face_detector.py``
    and ``face_landmarker.py`` feed them: every graph takes ``input`` (a BGR
    frame letterboxed into the detector size, or a 256 px crop); outputs are
    read by position, so their names are not pinned.  scrfd and retinaface
    give three score / box / point tensors (strides 8, 16, 32, two anchors
    per cell, no batch axis); yunet four (class, object, box, points) with a
    batch axis; yolo_face one ``[1, 20, anchors]`` (box centre and size,
    score, five points with a visibility each)."""

    def detector(name: str, file: str, tag: str, licence: str, vendor: str, outputs, size, notes: str) -> ModelSpec:
        return ModelSpec(
            name=name,
            kind="face_detector",
            file_name=file,
            licence=licence,
            vendor=vendor,
            inputs=(_image("input", size),),
            outputs=outputs,
            urls=facefusion_urls(tag, file),
            crop_size=640,
            warmup_dims=(("height", 640), ("width", 640)),
            notes=notes,
        )

    def strided(*widths: int, batch: bool = False) -> tuple[TensorSpec, ...]:
        lead: tuple[None, ...] = (None,) if batch else ()
        return tuple(TensorSpec(None, (*lead, None, width), "float32") for width in widths for _ in range(3))

    anchors = "strides 8/16/32, 2 anchors per cell; BGR (x - 127.5) / 128"
    return [
        detector(
            "retinaface",
            "retinaface_10g.onnx",
            "models-3.0.0",
            NON_COMMERCIAL,
            "InsightFace",
            strided(1, 4, 10),
            None,
            f"sizes 160-640; {anchors}",
        ),
        detector(
            "scrfd",
            "scrfd_2.5g.onnx",
            "models-3.0.0",
            NON_COMMERCIAL,
            "InsightFace",
            strided(1, 4, 10),
            None,
            f"sizes 160-640; {anchors}",
        ),
        detector(
            "yolo_face",
            "yoloface_8n.onnx",
            "models-3.0.0",
            "GPL-3.0",
            "derronqi",
            (TensorSpec(None, (None, 20, None), "float32"),),
            640,
            "640 x 640; BGR / 255",
        ),
        detector(
            "yunet",
            "yunet_2023_mar.onnx",
            "models-3.4.0",
            "MIT",
            "OpenCV",
            strided(1, 1, 4, 10, batch=True),
            640,
            "640 x 640; strides 8/16/32, 1 anchor per cell; BGR 0-255",
        ),
        ModelSpec(
            name="2dfan4",
            kind="face_landmarker",
            file_name="2dfan4.onnx",
            licence="MIT",
            vendor="breadbread1984",
            inputs=(_image("input", 256),),
            outputs=(TensorSpec(None, (None, 68, 3), "float32"), TensorSpec(None, (None, 68, 64, 64), "float32")),
            urls=facefusion_urls("models-3.0.0", "2dfan4.onnx"),
            crop_size=256,
            requires=("fan_68_5",),
            notes="input: BGR crop in [0, 1], the box's longer side scaled to 195 px in a 256 px square; outputs: 68 "
            "points on the 64 px heatmap grid (x, y, score) and the 68 heatmaps; fan_68_5 gives the face's angle",
        ),
        ModelSpec(
            name="peppa_wutz",
            kind="face_landmarker",
            file_name="peppa_wutz.onnx",
            licence="Apache-2.0",
            vendor="Unknown (FaceFusion's label)",
            inputs=(_image("input", 256),),
            outputs=(TensorSpec(None, None, "float32"),),
            urls=facefusion_urls("models-3.0.0", "peppa_wutz.onnx"),
            crop_size=256,
            requires=("fan_68_5",),
            notes="input: the crop 2dfan4 sees (BGR in [0, 1], 256 px); output: 68 x (x, y on the 64 px grid, "
            "score), read as FaceFusion reads it (its layout is not pinned: FaceFusion reshapes it to 68 x 3)",
        ),
        ModelSpec(
            name="fan_68_5",
            kind="face_landmarker",
            file_name="fan_68_5.onnx",
            licence="OpenRAIL-M",
            vendor="FaceFusion",
            inputs=(TensorSpec("input", (None, 5, 2), "float32"),),
            outputs=(TensorSpec(None, (None, 68, 2), "float32"),),
            urls=facefusion_urls("models-3.0.0", "fan_68_5.onnx"),
            template="ffhq_512",
            notes="68 points from the five, both on the ffhq_512 template at unit size",
        ),
    ]


def builtin_specs() -> dict[str, ModelSpec]:
    """A new dict of every built-in spec by name (the caller may add its own)."""
    specs = _swappers() + _embedders() + _enhancers() + _colorizers() + _background_removers()
    specs += _lip_syncers() + _voice_extractors() + _age_modifiers() + _live_portrait() + _deep_swappers()
    specs += _classifiers() + _face_maskers() + _face_analysers()
    return {spec.name: spec for spec in specs}


@functools.cache
def _builtin() -> Mapping[str, ModelSpec]:
    """The built-in specs, read-only, made once (the registries read their facts here at import)."""
    return MappingProxyType(builtin_specs())


def find_spec(name: str, catalog: Mapping[str, ModelSpec] | None = None) -> ModelSpec:
    """The spec called ``name`` (in ``catalog``, default the built-in one).

    Raises:
        UnknownModelError: no such model (a :class:`ModelNotFoundError` and an
            :class:`InvalidOptionError`); the message lists close names.
    """
    specs = _builtin() if catalog is None else catalog
    if name in specs:
        return specs[name]
    import difflib

    close = difflib.get_close_matches(name, list(specs), n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(close)}?" if close else "; run `faceweave models list` to see them"
    raise UnknownModelError(f"unknown model {name!r}{hint}")


def takes_embedding(model: ModelSpec) -> bool:
    """Whether the swapper ``model``'s source input is an identity embedding
    (``(batch, 512)``) rather than a source image."""
    source = model.inputs[1] if len(model.inputs) > 1 else None
    return source is not None and source.shape is not None and len(source.shape) == 2
