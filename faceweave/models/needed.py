"""The catalogued models a swap's options need, and one check that each has
its file before any is loaded.

Every model kind follows one rule (see
:class:`~faceweave.errors.ChosenModelMissingError`): a model the options
need whose file is not in the models folder is the user's input (exit code
2, HTTP 422), named with the option that asked for it and how to get it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from faceweave.errors import ChosenModelMissingError
from faceweave.names import LIVE_PORTRAIT, RESTORER_PARTS

if TYPE_CHECKING:
    from faceweave.models.cache import ModelStore
    from faceweave.options import AnalysisOptions, EnhancerOptions, SwapOptions


@dataclass(frozen=True)
class NeededModel:
    """A catalog entry ``name`` and what needs it (``"swapper inswapper_128"``)."""

    name: str
    role: str


def needed_models(options: SwapOptions) -> tuple[NeededModel, ...]:
    """The catalogued models ``options`` load, in load order: the analysis
    models, the swapper with its embedder and converter, the enhancers, the
    occluders and the face parser (none for the defaults).  The voice
    extractor is checked when a video's speech is read
    (:meth:`FaceSwapper.read_speech <faceweave.pipeline.FaceSwapper.read_speech>`):
    a photo or a live stream does not use it."""
    from faceweave.maskers import occluder_models
    from faceweave.swappers.neural import NEURAL_SWAPPERS

    needed = list(analysis_models(options.analysis))
    entry = NEURAL_SWAPPERS.get(options.swapper)
    if entry is not None:
        role = f"swapper {options.swapper}"
        companions = (entry.spec.embedder, entry.spec.converter)
        needed += [NeededModel(name, role) for name in (*filter(None, companions), options.swapper)]
    needed += processor_models(options.enhance)
    masks = options.masks
    if masks.face_occluder is not None:
        needed += [
            NeededModel(name, f"face occluder {masks.face_occluder}") for name in occluder_models(masks.face_occluder)
        ]
    if masks.face_parser is not None:
        needed.append(NeededModel(masks.face_parser, f"face parser {masks.face_parser}"))
    return tuple(needed)


def processor_models(enhance: EnhancerOptions) -> list[NeededModel]:
    """The models of the processors after the swap, in the order they run."""
    from faceweave.models.deepfacelive import catalog_name

    needed = []
    if enhance.deep_swapper is not None:
        needed.append(NeededModel(catalog_name(enhance.deep_swapper), f"deep swapper {enhance.deep_swapper}"))
    if enhance.expression_restorer is not None:
        role = f"expression restorer {enhance.expression_restorer}"
        needed += [NeededModel(LIVE_PORTRAIT[part], role) for part in RESTORER_PARTS]
    if enhance.age_modifier is not None:
        needed += [NeededModel(n, f"age modifier {enhance.age_modifier}") for n in age_models(enhance.age_modifier)]
    if enhance.edit.model is not None:
        needed += [NeededModel(name, f"face editor {enhance.edit.model}") for name in LIVE_PORTRAIT.values()]
    singles = (
        ("lip syncer", enhance.lip_syncer),
        ("face enhancer", enhance.face),
        ("background remover", enhance.background),
        ("frame colorizer", enhance.colorizer),
        ("frame enhancer", enhance.frame),
    )
    needed += [NeededModel(name, f"{role} {name}") for role, name in singles if name is not None]
    return needed


def analysis_models(analysis: AnalysisOptions) -> tuple[NeededModel, ...]:
    """The chosen ONNX face detector's (``many``: three) and landmarker's models (none for mediapipe's)."""
    from faceweave.analysis.face_detectors import detector_models

    detectors = detector_models(analysis.face_detector)
    detector, landmarker = f"face detector {analysis.face_detector}", f"face landmarker {analysis.face_landmarker}"
    return tuple(NeededModel(name, detector if name in detectors else landmarker) for name in analysis.onnx_models())


def check_present(store: ModelStore, needed: Iterable[NeededModel]) -> None:
    """Raise :class:`~faceweave.errors.ChosenModelMissingError` for the first
    model of ``needed`` without a file in ``store`` ("face parser
    bisenet_resnet_18: model bisenet_resnet_18 is not present in ...; get it
    with ..."); nothing is loaded or opened."""
    for model in needed:
        if store.locate(store.spec(model.name)) is not None:
            continue
        try:
            store.resolve(model.name)
        except ChosenModelMissingError as exc:
            raise ChosenModelMissingError(f"{model.role}: {exc}") from exc


def age_models(name: str) -> tuple[str, ...]:
    """The models the age modifier ``name`` runs: FRAN also the face classifier its age comes from."""
    from faceweave.names import AGE_MODIFIERS, FACE_CLASSIFIER

    return (FACE_CLASSIFIER, name) if AGE_MODIFIERS.get(name) == "fran" else (name,)
