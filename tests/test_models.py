"""Model registry: specs, the catalog, signatures, the store, downloads, imports, the CLI.

Downloads go to a local HTTP server started by the test (127.0.0.1 only);
model files are tiny graphs from :mod:`onnx_fixtures`.
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from faceweave.errors import (
    ChecksumError,
    DownloadError,
    InvalidOptionError,
    ModelFormatError,
    ModelNotFoundError,
    ModelSignatureError,
)
from faceweave.models import (
    KINDS,
    ModelSpec,
    ModelStore,
    TensorSpec,
    builtin_specs,
    check_signature,
    default_models_dir,
    download_model,
    import_model,
    read_signature,
)
from faceweave.models.download import part_path
from faceweave.runtime import SessionPool
from onnx_fixtures import INSWAPPER_128, NUDENET_320N, build_model, model_bytes, model_for_spec, save_model

CATALOG = builtin_specs()
REQUIRED = [
    "inswapper_128",
    "inswapper_128_fp16",
    "simswap_256",
    "simswap_unofficial_512",
    "hyperswap_1a_256",
    "hyperswap_1b_256",
    "hyperswap_1c_256",
    "ghost_1_256",
    "ghost_2_256",
    "ghost_3_256",
    "blendswap_256",
    "uniface_256",
    "arcface_w600k_r50",
    "arcface_simswap",
    "arcface_ghost",
    "gfpgan_1.4",
    "codeformer",
    "gpen_bfr_512",
    "restoreformer_plus_plus",
    "real_esrgan_x2",
    "real_esrgan_x4",
    "nudenet_320n",
]


# -- catalog ------------------------------------------------------------------


def test_catalog_has_the_required_models():
    assert [name for name in REQUIRED if name not in CATALOG] == []
    assert {spec.kind for spec in CATALOG.values()} == set(KINDS)


def test_catalog_facts_from_facefusion():
    inswapper = CATALOG["inswapper_128"]
    assert (
        inswapper.urls[0]
        == "https://github.com/facefusion/facefusion-assets/releases/download/models-3.0.0/inswapper_128.onnx"
    )
    assert inswapper.urls[1] == "https://huggingface.co/facefusion/models-3.0.0/resolve/main/inswapper_128.onnx"
    assert [(t.name, t.shape) for t in inswapper.inputs] == [("target", (None, 3, 128, 128)), ("source", (None, 512))]
    assert (inswapper.template, inswapper.crop_size, inswapper.licence) == ("arcface_128", 128, "Non-Commercial")
    assert CATALOG["simswap_256"].mean == (0.485, 0.456, 0.406) and CATALOG["simswap_256"].std == (0.229, 0.224, 0.225)
    assert CATALOG["hyperswap_1a_256"].urls[0].endswith("/models-3.3.0/hyperswap_1a_256.onnx")
    assert CATALOG["gfpgan_1.4"].template == "ffhq_512" and CATALOG["gfpgan_1.4"].crop_size == 512
    assert [t.name for t in CATALOG["codeformer"].inputs] == ["input", "weight"]
    assert CATALOG["nudenet_320n"].bundled == ("nudenet", "320n.onnx") and CATALOG["nudenet_320n"].urls == ()


@pytest.mark.parametrize("name", sorted(CATALOG))
def test_every_spec_loads_and_warms_up_as_a_tiny_model(tmp_path, name):
    """timm-style: every registered spec has a consistent signature that the
    runtime can load (checked against the spec) and warm up."""
    spec = CATALOG[name]
    if spec.bundled:
        spec = replace(spec, bundled=None, sha256=None, size=None)
    store = ModelStore(tmp_path, catalog={spec.name: spec})
    store.path_for(spec).write_bytes(model_for_spec(spec).SerializeToString())
    check_signature(spec.inputs, spec.outputs, read_signature(store.path_for(spec)), model=name)
    with SessionPool(store=store) as pool:
        model = pool.get(name)
        assert [t.name for t in model.inputs] == [t.name or f"input_{i}" for i, t in enumerate(spec.inputs)]
        assert pool.records[0].warmup_ms >= 0.0


def test_bundled_nudenet_matches_its_spec():
    pytest.importorskip("nudenet")
    store = ModelStore("/nonexistent/faceweave-models")
    spec = store.spec("nudenet_320n")
    path = store.resolve("nudenet_320n")  # from the wheel, never the network
    assert path.name == "320n.onnx" and store.is_present(spec)
    check_signature(spec.inputs, spec.outputs, read_signature(path), model="nudenet_320n")
    assert path.stat().st_size == spec.size
    if hashlib.sha256(path.read_bytes()).hexdigest() != spec.sha256:
        pytest.skip("a nudenet version other than 3.4.2 ships a different 320n.onnx")


# (case id, kwargs changed on a valid spec, fragment)
BAD_SPECS = [
    ("kind", {"kind": "detector"}, "unknown kind 'detector'"),
    ("sha256", {"sha256": "ABC"}, "64 lowercase hex"),
    ("file-name", {"file_name": "../x.onnx"}, "plain name"),
    ("std", {"std": (0.5, 0.0, 0.5)}, "positive"),
    ("no-outputs", {"outputs": ()}, "at least one input and one output"),
    ("name", {"name": "a b"}, "model name"),
]


@pytest.mark.parametrize("changes, fragment", [c[1:] for c in BAD_SPECS], ids=[c[0] for c in BAD_SPECS])
def test_spec_validates_itself(changes, fragment):
    with pytest.raises(InvalidOptionError, match=fragment):
        replace(CATALOG["inswapper_128"], **changes)


# -- signatures ---------------------------------------------------------------

T = TensorSpec

# (case id, expected inputs, actual inputs as (name, shape, dtype), fragment or None)
SIGNATURES = [
    ("exact", [T("a", (1, 3, 8, 8))], [("a", [1, 3, 8, 8], "float32")], None),
    ("dynamic-in-spec", [T("a", (None, 3, "h", "w"))], [("a", [4, 3, 8, 8], "float32")], None),
    ("dynamic-in-file", [T("a", (1, 3, 8, 8))], [("a", ["n", 3, "h", 8], "float32")], None),
    ("unnamed-by-position", [T(None, (1, 2))], [("whatever", [1, 2], "float32")], None),
    ("any-dtype", [T("a", (1,), None)], [("a", [1], "float16")], None),
    ("wrong-name", [T("a", (1,))], [("b", [1], "float32")], "no input named 'a'"),
    ("wrong-size", [T("a", (1, 3, 8, 8))], [("a", [1, 3, 8, 9], "float32")], "size 9 on axis 3, expected 8"),
    ("wrong-rank", [T("a", (1, 3, 8, 8))], [("a", [3, 8, 8], "float32")], "rank 3, expected 4"),
    ("wrong-dtype", [T("a", (1,))], [("a", [1], "float16")], "dtype float16, expected float32"),
    ("wrong-count", [T("a", (1,))], [("a", [1], "float32"), ("b", [1], "float32")], "2 inputs, expected 1"),
]


@pytest.mark.parametrize("expected, actual, fragment", [c[1:] for c in SIGNATURES], ids=[c[0] for c in SIGNATURES])
def test_check_signature(tmp_path, expected, actual, fragment):
    outputs = [("y", [1], "float32")]
    path = save_model(tmp_path / "m.onnx", actual, outputs)
    signature = read_signature(path)
    if fragment is None:
        check_signature(expected, [T("y", (1,))], signature, model="m")
        return
    with pytest.raises(ModelSignatureError) as caught:
        check_signature(expected, [T("y", (1,))], signature, model="m")
    assert fragment in str(caught.value)
    assert "expected inputs (" in str(caught.value) and "found inputs (" in str(caught.value)


def _out(name: str, size: int = 1) -> tuple[str, list[int], str]:
    return (name, [1, size], "float32")


# (case id, expected outputs, actual outputs as (name, shape, dtype), extra names or the error's fragment)
OUTPUT_SIGNATURES = [
    ("exact", [T(None, (1, 19))], [_out("output", 19)], ()),
    ("two-extra", [T(None, (1, 19))], [_out("out", 19), _out("f16", 2), _out("f32", 2)], ("f16", "f32")),
    ("named-among-the-first", [T("a", (1, 1)), T("b", (1, 1))], [_out("b"), _out("a"), _out("c")], ("c",)),
    ("the-first-is-checked", [T(None, (1, 19))], [_out("f16", 2), _out("out", 19)], "size 2 on axis 1, expected 19"),
    ("named-only-later", [T("a", (1, 1))], [_out("c"), _out("a")], "no output named 'a'"),
    ("too-few", [T("a", (1, 1)), T("b", (1, 1))], [_out("a")], "1 outputs, expected 2"),
]


@pytest.mark.parametrize(
    "expected, actual, outcome", [c[1:] for c in OUTPUT_SIGNATURES], ids=[c[0] for c in OUTPUT_SIGNATURES]
)
def test_extra_outputs_after_the_specs_are_named_in_one_warning(tmp_path, caplog, expected, actual, outcome):
    """A file may have more outputs than its spec: the spec's are the file's
    first ones (what is read), the others are named in one warning."""
    import logging

    signature = read_signature(save_model(tmp_path / "m.onnx", [("x", [1], "float32")], actual))
    if isinstance(outcome, str):
        with pytest.raises(ModelSignatureError, match=outcome):
            check_signature([T("x", (1,))], expected, signature, model="m")
        return
    with caplog.at_level(logging.WARNING, logger="faceweave.models"):
        assert check_signature([T("x", (1,))], expected, signature, model="m") == outcome
    warnings = [r.getMessage() for r in caplog.records]
    assert warnings == ([] if not outcome else [warnings[0]])
    assert all(name in "".join(warnings) for name in outcome)


def test_read_signature_skips_initializers_and_reads_dims(tmp_path):
    import numpy as np
    from onnx import TensorProto, helper

    model = build_model(*NUDENET_320N, initializers={"emap": np.eye(4, dtype=np.float32)})
    # old-IR style: an initializer also listed as a graph input
    model.graph.input.append(helper.make_tensor_value_info("emap", TensorProto.FLOAT, [4, 4]))
    signature = read_signature(model.SerializeToString())
    assert [t.name for t in signature.inputs] == ["images"]
    assert signature.inputs[0].shape == ("batch", 3, "height", "width")
    assert signature.outputs[0] == T("output0", ("batch", 22, "anchors"), "float32")


def test_read_signature_errors(tmp_path):
    (tmp_path / "notes.onnx").write_text("not a model at all\n" * 20)
    with pytest.raises(ModelFormatError, match="not an ONNX model"):
        read_signature(tmp_path / "notes.onnx")
    whole = model_bytes(*INSWAPPER_128)
    (tmp_path / "cut.onnx").write_bytes(whole[: len(whole) // 3])
    with pytest.raises(ModelFormatError):
        read_signature(tmp_path / "cut.onnx")
    (tmp_path / "empty.onnx").write_bytes(b"")
    with pytest.raises(ModelFormatError):
        read_signature(tmp_path / "empty.onnx")
    with pytest.raises(ModelNotFoundError):
        read_signature(tmp_path / "absent.onnx")


# -- store --------------------------------------------------------------------

# (case id, environment, expected folder)
FOLDERS = [
    ("explicit", {"FACEWEAVE_MODELS": "/m", "XDG_CACHE_HOME": "/x", "HOME": "/h"}, "/m"),
    ("xdg", {"XDG_CACHE_HOME": "/x", "HOME": "/h"}, "/x/faceweave/models"),
    ("home", {"HOME": "/h"}, "/h/.cache/faceweave/models"),
    (
        "empty-values-ignored",
        {"FACEWEAVE_MODELS": "", "XDG_CACHE_HOME": "", "HOME": "/h"},
        "/h/.cache/faceweave/models",
    ),
]


@pytest.mark.parametrize("environ, expected", [c[1:] for c in FOLDERS], ids=[c[0] for c in FOLDERS])
def test_default_models_dir(monkeypatch, environ, expected):
    monkeypatch.setenv("HOME", environ["HOME"])
    assert default_models_dir(environ) == Path(expected)


def test_store_resolve_messages(tmp_path):
    store = ModelStore(tmp_path)
    with pytest.raises(ModelNotFoundError, match="unknown model 'inswapper128'; did you mean inswapper_128"):
        store.resolve("inswapper128")
    with pytest.raises(ModelNotFoundError) as caught:
        store.resolve("gfpgan_1.4")
    message = str(caught.value)
    assert str(tmp_path) in message and "faceweave models download gfpgan_1.4" in message
    assert "faceweave models import gfpgan_1.4 PATH" in message


# -- import -------------------------------------------------------------------


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_import_copies_and_pins(tmp_path):
    store = ModelStore(tmp_path / "models")
    mine = save_model(tmp_path / "downloads" / "my_inswapper.onnx", *INSWAPPER_128)
    used = import_model(store, "inswapper_128", mine)
    assert used == store.path_for(store.spec("inswapper_128")) and used.read_bytes() == mine.read_bytes()
    pins = json.loads(store.pins_path.read_text())
    assert pins == {"inswapper_128": {"sha256": _sha(mine), "size": mine.stat().st_size, "source": "import"}}
    assert store.resolve("inswapper_128") == used
    assert store.verify("inswapper_128") == used
    used.write_bytes(used.read_bytes()[:-1] + b"\0")  # same size, other bytes
    with pytest.raises(ChecksumError, match="sha256"):
        store.verify("inswapper_128")
    used.write_bytes(b"short")
    with pytest.raises(ChecksumError, match="has 5 bytes"):
        store.resolve("inswapper_128")


def test_import_without_copy_records_the_path(tmp_path):
    store = ModelStore(tmp_path / "models")
    mine = save_model(tmp_path / "elsewhere" / "a.onnx", *INSWAPPER_128)
    assert import_model(store, "inswapper_128", mine, copy=False) == mine.resolve()
    assert not store.path_for(store.spec("inswapper_128")).exists()
    assert store.resolve("inswapper_128") == mine.resolve()
    assert store.pins()["inswapper_128"].path == str(mine.resolve())


def test_import_refusals(tmp_path):
    store = ModelStore(tmp_path / "models")
    wrong = save_model(
        tmp_path / "simswap.onnx",
        [("target", [1, 3, 256, 256], "float32"), ("source", [1, 512], "float32")],
        [("out", [1, 3, 256, 256], "float32")],
    )
    with pytest.raises(ModelSignatureError, match=r"inswapper_128 .*size 256 on axis 2, expected 128"):
        import_model(store, "inswapper_128", wrong)
    text = tmp_path / "text.onnx"
    text.write_text("hello")
    with pytest.raises(ModelFormatError):
        import_model(store, "inswapper_128", text)
    with pytest.raises(ModelNotFoundError, match="unknown model"):
        import_model(store, "no_such_model", text)
    with pytest.raises(ModelNotFoundError, match="is not a file"):
        import_model(store, "inswapper_128", tmp_path / "absent.onnx")
    assert not store.folder.exists() or list(store.folder.iterdir()) == []


def test_import_checks_a_spec_pinned_sha256(tmp_path):
    spec = replace(CATALOG["inswapper_128"], sha256="0" * 64)
    store = ModelStore(tmp_path / "models", catalog={spec.name: spec})
    mine = save_model(tmp_path / "a.onnx", *INSWAPPER_128)
    with pytest.raises(ChecksumError, match="--trust"):
        import_model(store, spec.name, mine)
    assert import_model(store, spec.name, mine, trust=True).is_file()
    assert store.expected_sha256(spec) == _sha(mine)  # the user's pin wins over the spec


# -- download -----------------------------------------------------------------


class _Server:
    """A local file server: ``cut`` makes the first ``cut`` requests stop half-way
    (Content-Length says the whole), ``ignore_range`` answers 200 to Range
    requests, ``missing`` paths answer 404.  ``requests`` logs (path, Range)."""

    def __init__(self, files: dict[str, bytes]):
        self.files = files
        self.cut = 0
        self.ignore_range = False
        self.requests: list[tuple[str, str | None]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep the test output clean
                pass

            def do_GET(self):
                rng = self.headers.get("Range")
                server.requests.append((self.path, rng))
                data = server.files.get(self.path)
                if data is None:
                    self.send_error(404)
                    return
                start = 0
                if rng and not server.ignore_range:
                    start = int(rng.split("=")[1].split("-")[0])
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                else:
                    self.send_response(200)
                body = data[start:]
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if server.cut > 0:
                    server.cut -= 1
                    self.wfile.write(body[: len(body) // 2])
                    self.wfile.flush()
                    self.close_connection = True
                    return
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def model_requests(self) -> list[tuple[str, str | None]]:
        """The requests for model files (a download also asks for FaceFusion's ``NAME.hash``)."""
        return [r for r in self.requests if not r[0].endswith(".hash")]

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture()
def server():
    import numpy as np

    filler = np.arange(3 << 18, dtype=np.float32)  # 3 MiB: several 1 MiB chunks
    payload = model_bytes(*INSWAPPER_128, initializers={"emap": filler})
    srv = _Server({"/m/inswapper_128.onnx": payload})
    srv.payload = payload
    yield srv
    srv.close()


def _store_for(tmp_path, server, **changes) -> tuple[ModelStore, ModelSpec]:
    spec = replace(CATALOG["inswapper_128"], urls=(f"{server.url}/m/inswapper_128.onnx",), **changes)
    return ModelStore(tmp_path / "models", catalog={spec.name: spec}), spec


def test_download_pins_what_it_got(tmp_path, server):
    store, spec = _store_for(tmp_path, server)
    seen = []
    path = download_model(store, spec.name, progress=lambda done, total: seen.append((done, total)))
    assert path.read_bytes() == server.payload
    assert store.pins()["inswapper_128"].sha256 == hashlib.sha256(server.payload).hexdigest()
    assert store.pins()["inswapper_128"].source == "download"
    assert seen[-1] == (len(server.payload), len(server.payload))
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)
    assert not part_path(path).exists()
    download_model(store, spec.name)  # present: no second request
    assert len(server.model_requests) == 1


def test_download_resumes_after_a_cut_connection(tmp_path, server):
    sha = hashlib.sha256(server.payload).hexdigest()
    store, spec = _store_for(tmp_path, server, sha256=sha, size=len(server.payload))
    server.cut = 1
    with pytest.raises(DownloadError, match="run again to resume") as caught:
        download_model(store, spec.name, retries=0)
    assert not isinstance(caught.value, ChecksumError)
    part = part_path(store.path_for(spec))
    half = len(server.payload) // 2
    assert part.stat().st_size == half and not store.path_for(spec).exists()
    path = download_model(store, spec.name, retries=0)
    assert path.read_bytes() == server.payload and not part.exists()
    assert server.model_requests == [("/m/inswapper_128.onnx", None), ("/m/inswapper_128.onnx", f"bytes={half}-")]
    assert store.pins() == {}  # the spec pins the hash


def test_download_retries_by_itself(tmp_path, server):
    store, spec = _store_for(tmp_path, server)
    server.cut = 2
    path = download_model(store, spec.name, retries=2)
    assert path.read_bytes() == server.payload
    assert [r for _, r in server.model_requests][0] is None and all(r for _, r in server.model_requests[1:])
    assert len(server.model_requests) == 3


def test_download_restarts_when_the_server_ignores_range(tmp_path, server):
    store, spec = _store_for(tmp_path, server)
    server.cut, server.ignore_range = 1, True
    path = download_model(store, spec.name, retries=1)
    assert path.read_bytes() == server.payload


def test_truncated_download_keeps_the_part(tmp_path, server):
    store, spec = _store_for(tmp_path, server)
    server.cut = 5
    with pytest.raises(DownloadError, match=r"stopped at \d+ of \d+ bytes"):
        download_model(store, spec.name, retries=1)
    assert 0 < part_path(store.path_for(spec)).stat().st_size < len(server.payload)
    assert not store.path_for(spec).exists() and store.pins() == {}


def test_wrong_checksum_deletes_the_file(tmp_path, server):
    store, spec = _store_for(tmp_path, server, sha256="f" * 64)
    with pytest.raises(ChecksumError, match=f"sha256 {hashlib.sha256(server.payload).hexdigest()}, expected f{{64}}"):
        download_model(store, spec.name)
    assert list(store.folder.iterdir()) == []


def test_wrong_size_is_refused_before_writing(tmp_path, server):
    store, spec = _store_for(tmp_path, server, size=len(server.payload) + 1)
    with pytest.raises(ChecksumError, match="the spec expects"):
        download_model(store, spec.name)
    assert list(store.folder.iterdir()) == []


def test_offline_never_touches_the_network(tmp_path, server):
    store, spec = _store_for(tmp_path, server)
    with pytest.raises(ModelNotFoundError, match="--offline"):
        download_model(store, spec.name, offline=True)
    assert server.requests == []
    save_model(store.path_for(spec), *INSWAPPER_128)
    assert download_model(store, spec.name, offline=True) == store.path_for(spec)
    assert server.requests == []


def test_download_tries_the_next_url(tmp_path, server):
    spec = replace(CATALOG["inswapper_128"], urls=(f"{server.url}/gone.onnx", f"{server.url}/m/inswapper_128.onnx"))
    store = ModelStore(tmp_path / "models", catalog={spec.name: spec})
    assert download_model(store, spec.name).read_bytes() == server.payload
    spec = replace(spec, urls=(f"{server.url}/gone.onnx", f"{server.url}/also-gone.onnx"))
    store = ModelStore(tmp_path / "other", catalog={spec.name: spec})
    with pytest.raises(DownloadError, match="HTTP 404.*HTTP 404"):
        download_model(store, spec.name)


def test_download_that_is_not_the_model_is_deleted(tmp_path, server):
    server.files["/m/inswapper_128.onnx"] = b"<html>rate limited</html>" * 100
    store, spec = _store_for(tmp_path, server)
    with pytest.raises(ModelFormatError):
        download_model(store, spec.name)
    server.files["/m/inswapper_128.onnx"] = model_bytes([("x", [1], "float32")], [("y", [1], "float32")])
    with pytest.raises(ModelSignatureError, match="downloaded inswapper_128"):
        download_model(store, spec.name)
    assert list(store.folder.iterdir()) == [] and store.pins() == {}


def test_download_of_unknown_or_urlless_models(tmp_path):
    store = ModelStore(tmp_path)
    with pytest.raises(ModelNotFoundError, match="unknown model"):
        download_model(store, "inswapper_256")
    spec = replace(CATALOG["gfpgan_1.4"], urls=())
    with pytest.raises(ModelNotFoundError, match="no download URL"):
        download_model(ModelStore(tmp_path, catalog={spec.name: spec}), spec.name)
    nudenet = replace(CATALOG["nudenet_320n"], bundled=("no_such_package_xyz", "320n.onnx"))
    with pytest.raises(ModelNotFoundError, match="pip install no_such_package_xyz"):
        download_model(ModelStore(tmp_path, catalog={nudenet.name: nudenet}), nudenet.name)


# -- CLI ----------------------------------------------------------------------


def _invoke(capfd, *args: str):
    from typer.testing import CliRunner

    from faceweave.cli.models import build_models_app

    result = CliRunner().invoke(build_models_app(), list(args))
    captured = capfd.readouterr()
    return result.exit_code, result.stdout + captured.out, captured.err


def test_cli_list(tmp_path, capfd):
    store = ModelStore(tmp_path)
    save_model(
        store.path_for(store.spec("gfpgan_1.4")),
        [("input", [1, 3, 512, 512], "float32")],
        [("output", [1, 3, 512, 512], "float32")],
    )
    code, out, _ = _invoke(capfd, "list", "--models-dir", str(tmp_path), "--json")
    assert code == 0
    rows = {row["name"]: row for row in json.loads(out)["models"]}
    assert set(REQUIRED) <= set(rows)
    assert rows["gfpgan_1.4"]["present"] and not rows["inswapper_128"]["present"]
    assert rows["inswapper_128"]["sha256"] == "not pinned" and rows["inswapper_128"]["licence"] == "Non-Commercial"
    code, out, _ = _invoke(capfd, "list", "--models-dir", str(tmp_path))
    assert code == 0 and "inswapper_128" in out and "gfpgan_1.4" in out and str(tmp_path.name) in out.replace("\n", "")


def test_cli_import_and_errors(tmp_path, capfd):
    models = tmp_path / "models"
    good = save_model(tmp_path / "a.onnx", *INSWAPPER_128)
    code, out, err = _invoke(capfd, "import", "inswapper_128", str(good), "--models-dir", str(models))
    assert code == 0, err
    assert f"sha256 {_sha(good)}" in out
    wrong = save_model(tmp_path / "b.onnx", [("x", [1], "float32")], [("y", [1], "float32")])
    code, out, err = _invoke(capfd, "import", "gfpgan_1.4", str(wrong), "--models-dir", str(models))
    assert code == 2  # the user's file is bad input
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "does not match its spec" in lines[0]
    code, out, err = _invoke(capfd, "download", "gfpgan_1.4", "--offline", "--models-dir", str(models))
    assert code == 1 and "--offline" in err and "Traceback" not in err
    code, out, err = _invoke(capfd, "download", "no_such_model", "--models-dir", str(models))
    assert code == 2 and "unknown model 'no_such_model'" in err


def test_cli_download_from_local_server(tmp_path, capfd, server, monkeypatch):
    spec = replace(CATALOG["inswapper_128"], urls=(f"{server.url}/m/inswapper_128.onnx",))
    monkeypatch.setattr("faceweave.models.cache.builtin_specs", lambda: {spec.name: spec})
    code, out, err = _invoke(capfd, "download", "inswapper_128", "--models-dir", str(tmp_path))
    assert code == 0, err
    assert "downloaded to" in out and (tmp_path / "inswapper_128.onnx").read_bytes() == server.payload
