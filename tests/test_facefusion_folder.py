"""A FaceFusion models folder as it is: its ``.hash`` files (CRC32) checked by
``--models-dir`` and by ``models import --from-facefusion``; corrupt and
mismatched files refused in one line, missing ones reported, nothing half
imported."""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import pytest
from tests.neural_fixtures import catalog_stand_in, facefusion_folder

from faceweave.errors import (
    BadModelFileError,
    ChecksumError,
    InvalidOptionError,
    ModelFileChecksumError,
    ModelFileSignatureError,
)
from faceweave.models import ModelStore, builtin_specs, import_model
from faceweave.models.facefusion import crc32_file, hash_path, import_facefusion_folder, read_hash
from faceweave.runtime import SessionPool

CATALOG = builtin_specs()


def _invoke(capfd, *args: str) -> tuple[int, str, str]:
    from typer.testing import CliRunner

    from faceweave.cli.models import build_models_app

    result = CliRunner().invoke(build_models_app(), [str(a) for a in args])
    captured = capfd.readouterr()
    return result.exit_code, result.stdout + captured.out, captured.err


def _one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    return lines[0]


def _corrupt(path: Path) -> None:
    """Flip one byte near the end (same size, so only a hash can tell)."""
    data = bytearray(path.read_bytes())
    data[-3] ^= 0xFF
    path.write_bytes(bytes(data))


def _listing(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


# -- the hash files ------------------------------------------------------------


def test_crc32_is_facefusions_format(tmp_path):
    path = tmp_path / "gfpgan_1.4.onnx"
    path.write_bytes(b"hello" * 300_000)  # over one read chunk
    assert crc32_file(path) == format(zlib.crc32(path.read_bytes()), "08x") and len(crc32_file(path)) == 8
    assert hash_path(path).name == "gfpgan_1.4.hash"


@pytest.mark.parametrize(
    "text, expected",
    [
        ("3610a686", "3610a686"),
        ("3610A686\n", "3610a686"),
        ("3610a68", ChecksumError),
        ("", ChecksumError),
        ("not a hash", ChecksumError),
    ],
)
def test_read_hash(tmp_path, text, expected):
    path = tmp_path / "x.hash"
    path.write_text(text)
    if isinstance(expected, type):
        with pytest.raises(expected, match="not a FaceFusion hash file"):
            read_hash(path)
    else:
        assert read_hash(path) == expected


# -- --models-dir at a FaceFusion folder ------------------------------------------


def test_models_dir_at_a_facefusion_folder_checks_the_hash(tmp_path):
    folder = facefusion_folder(
        tmp_path / "models",
        [
            CATALOG[n]
            for n in (
                "gfpgan_1.4",
                "real_esrgan_x2",
            )
        ],
    )
    hash_path(folder / "real_esrgan_x2.onnx").unlink()  # no .hash: the signature check alone
    store = ModelStore(folder)
    with SessionPool(store=store) as pool:
        assert pool.get("gfpgan_1.4") is not None and pool.get("real_esrgan_x2") is not None
    expected = read_hash(hash_path(folder / "gfpgan_1.4.onnx"))
    _corrupt(folder / "gfpgan_1.4.onnx")
    with SessionPool(store=store) as pool, pytest.raises(ChecksumError) as caught:
        pool.get("gfpgan_1.4")
    message = str(caught.value)
    assert "model gfpgan_1.4" in message and f"expects {expected}" in message and "gfpgan_1.4.hash" in message
    assert "\n" not in message


# -- models import --from-facefusion ----------------------------------------------


def test_import_from_facefusion_copies_checks_and_pins(tmp_path, capfd):
    folder = facefusion_folder(
        tmp_path / "ff",
        [
            CATALOG[n]
            for n in (
                "hyperswap_1a_256",
                "arcface_w600k_r50",
                "gfpgan_1.4",
            )
        ],
    )
    (folder / "unrelated.onnx").write_bytes(b"FaceFusion keeps other files too")
    target = tmp_path / "models"
    code, out, err = _invoke(capfd, "import", "--from-facefusion", folder, "--models-dir", target)
    assert code == 0 and err == "", err
    crc = read_hash(hash_path(folder / "gfpgan_1.4.onnx"))
    assert f"gfpgan_1.4: imported {target / 'gfpgan_1.4.onnx'} (CRC32 {crc} checked)" in out
    assert _listing(target) == ["arcface_w600k_r50.onnx", "gfpgan_1.4.onnx", "hyperswap_1a_256.onnx", "pins.json"]
    pins = json.loads((target / "pins.json").read_text())
    assert set(pins) == {"arcface_w600k_r50", "gfpgan_1.4", "hyperswap_1a_256"}
    assert all(pin["source"] == "import" and "path" not in pin for pin in pins.values())


def test_import_from_facefusion_with_link_leaves_the_files(tmp_path):
    folder = facefusion_folder(tmp_path / "ff", [CATALOG[n] for n in ("gfpgan_1.4",)])
    store = ModelStore(tmp_path / "models")
    result = import_facefusion_folder(store, folder, copy=False)
    assert [m.path for m in result.imported] == [(folder / "gfpgan_1.4.onnx").resolve()]
    assert _listing(store.folder) == ["pins.json"]
    assert store.resolve("gfpgan_1.4") == (folder / "gfpgan_1.4.onnx").resolve()
    _corrupt(folder / "gfpgan_1.4.onnx")  # FaceFusion's file changes later: the linked store notices
    with pytest.raises(ChecksumError, match="gfpgan_1.4"):
        store.resolve("gfpgan_1.4")


def test_missing_files_are_reported_and_the_rest_imported(tmp_path, capfd):
    folder = facefusion_folder(
        tmp_path / "ff", [CATALOG[n] for n in ("hififace_unofficial_256",)]
    )  # without its ArcFace and converter
    (folder / "inswapper_128.hash").write_text("0badf00d")  # an interrupted download
    target = tmp_path / "models"
    code, out, err = _invoke(capfd, "import", "--from-facefusion", folder, "--models-dir", target)
    assert code == 0
    assert "hififace_unofficial_256: imported" in out
    lines = err.strip().splitlines()
    assert sorted(line.split(" (")[0] for line in lines) == [
        "missing: arcface_w600k_r50",
        "missing: crossface_hififace",
        "missing: inswapper_128",
    ]
    assert any("inswapper_128.hash is there without the model file" in line for line in lines)
    assert any("hififace_unofficial_256 needs it" in line for line in lines)
    assert "faceweave models download crossface_hififace" in err


@pytest.mark.parametrize("spoil", ["corrupt", "wrong signature", "bad hash file"])
def test_a_bad_file_refuses_the_whole_folder(tmp_path, capfd, spoil):
    folder = facefusion_folder(
        tmp_path / "ff",
        [
            CATALOG[n]
            for n in (
                "gfpgan_1.4",
                "gpen_bfr_256",
                "real_esrgan_x4",
            )
        ],
    )
    bad = folder / "gpen_bfr_256.onnx"
    if spoil == "corrupt":
        _corrupt(bad)
    elif spoil == "wrong signature":  # a consistent .hash, but gfpgan's graph under gpen_bfr_256's name
        bad.write_bytes((folder / "gfpgan_1.4.onnx").read_bytes())
        hash_path(bad).write_text(crc32_file(bad))
    else:
        hash_path(bad).write_text("<html>404</html>")
    target = tmp_path / "models"
    code, out, err = _invoke(capfd, "import", "--from-facefusion", folder, "--models-dir", target)
    assert code == 2
    line = _one_error_line(err)
    assert "gpen_bfr_256" in line
    fragment = {"corrupt": "expects", "wrong signature": "does not match its spec", "bad hash file": "8 hex digits"}
    assert fragment[spoil] in line
    assert _listing(target) == []  # nothing copied, nothing pinned


def test_a_failing_copy_leaves_nothing_behind(tmp_path, monkeypatch):
    folder = facefusion_folder(
        tmp_path / "ff",
        [
            CATALOG[n]
            for n in (
                "gfpgan_1.4",
                "gpen_bfr_512",
            )
        ],
    )
    store = ModelStore(tmp_path / "models")
    import shutil

    real_copy = shutil.copyfile
    calls: list[str] = []

    def copy_then_fail(source, target, *args, **kwargs):
        calls.append(str(source))
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        return real_copy(source, target, *args, **kwargs)

    monkeypatch.setattr(shutil, "copyfile", copy_then_fail)
    with pytest.raises(OSError, match="No space"):
        import_facefusion_folder(store, folder)
    assert len(calls) == 2 and _listing(store.folder) == []  # the first copy is not left in place either


def test_folder_refusals(tmp_path):
    store = ModelStore(tmp_path / "models")
    stand_in = facefusion_folder(tmp_path / "pinned", [CATALOG["nudenet_320n"]])
    with pytest.raises(ModelFileChecksumError, match="nudenet_320n .*the spec pins c15d8273"):
        import_facefusion_folder(store, stand_in)  # its sha256 is pinned: a stand-in is not the file
    with pytest.raises(InvalidOptionError, match="not a folder"):
        import_facefusion_folder(store, tmp_path / "absent")
    (tmp_path / "empty").mkdir()
    with pytest.raises(BadModelFileError, match="holds no model file faceweave knows"):
        import_facefusion_folder(store, tmp_path / "empty")


# -- one file, by name or by its file name ----------------------------------------


def test_import_one_file_checks_the_hash_beside_it(tmp_path, capfd):
    folder = facefusion_folder(tmp_path / "ff", [CATALOG[n] for n in ("hyperswap_1b_256",)])
    store = ModelStore(tmp_path / "models")
    assert import_model(store, "hyperswap_1b_256", folder / "hyperswap_1b_256.onnx").is_file()
    _corrupt(folder / "hyperswap_1b_256.onnx")
    with pytest.raises(ModelFileChecksumError, match="hyperswap_1b_256.hash"):
        import_model(store, "hyperswap_1b_256", folder / "hyperswap_1b_256.onnx")
    code, _, err = _invoke(capfd, "import", folder / "hyperswap_1b_256.onnx", "--models-dir", tmp_path / "other")
    assert code == 2 and "CRC32" in _one_error_line(err)


def test_import_refuses_the_old_single_output_hyperswap_signature(tmp_path):
    """The bug this catalog fixes, the other way round: a file with only the
    face output is not the real hyperswap."""
    spec = CATALOG["hyperswap_1c_256"]
    from dataclasses import replace

    one_output = replace(spec, outputs=spec.outputs[:1])
    path = tmp_path / "hyperswap_1c_256.onnx"
    path.write_bytes(catalog_stand_in(one_output).SerializeToString())
    with pytest.raises(ModelFileSignatureError, match="1 outputs, expected 2"):
        import_model(ModelStore(tmp_path / "models"), spec.name, path)


@pytest.mark.parametrize(
    "args, fragments",
    [
        (["import", "{D}/nosuch.onnx"], ["cannot tell which model nosuch.onnx is", "models import NAME"]),
        (["import", "nosuch", "{D}/gfpgan_1.4.onnx"], ["unknown model 'nosuch'"]),
        (["import", "gfpgan_1.4", "{D}/gfpgan_1.4.onnx", "extra"], ["one or two arguments"]),
        (["import", "{D}/gfpgan_1.4.onnx", "--from-facefusion", "{D}"], ["not both"]),
        (["import", "--from-facefusion", "{D}", "--trust"], ["--trust applies to one file"]),
        (["download", "nosuch"], ["unknown model 'nosuch'"]),
        (["download", "gfpgan_1.4", "--mirror", "ftp://example.org/m"], ["--mirror", "http://"]),
    ],
)
def test_cli_bad_input_is_one_line_and_exit_code_2(tmp_path, capfd, args, fragments):
    folder = facefusion_folder(tmp_path / "ff", [CATALOG[n] for n in ("gfpgan_1.4",)])
    argv = [a.replace("{D}", str(folder)) for a in args] + ["--models-dir", str(tmp_path / "models")]
    code, _, err = _invoke(capfd, *argv)
    assert code == 2
    line = _one_error_line(err)
    assert all(f in line for f in fragments), line
    assert _listing(tmp_path / "models") == []


def test_download_from_a_mirror_without_the_file(tmp_path, capfd):
    from tests.neural_fixtures import FolderServer

    (tmp_path / "mirror").mkdir()
    with FolderServer(tmp_path / "mirror") as server:
        code, _, err = _invoke(capfd, "download", "gfpgan_1.4", "--mirror", server.url, "--models-dir", tmp_path / "m")
    assert code == 1 and f"{server.url}/gfpgan_1.4.onnx: HTTP 404" in _one_error_line(err)


def test_download_checks_the_hash_published_beside_the_file(tmp_path, capfd):
    from tests.neural_fixtures import FolderServer

    mirror = facefusion_folder(tmp_path / "mirror", [CATALOG["gfpgan_1.4"], CATALOG["gpen_bfr_512"]])
    hash_path(mirror / "gpen_bfr_512.onnx").write_text("0badf00d")
    target = tmp_path / "m"
    with FolderServer(mirror) as server:
        code, out, err = _invoke(capfd, "download", "gfpgan_1.4", "--mirror", server.url, "--models-dir", target)
        assert code == 0 and "gfpgan_1.4: downloaded" in out, err
        code, _, err = _invoke(capfd, "download", "gpen_bfr_512", "--mirror", server.url, "--models-dir", target)
    line = _one_error_line(err)
    assert code == 1 and "gpen_bfr_512" in line and "0badf00d" in line and "deleted" in line
    assert _listing(target) == ["gfpgan_1.4.onnx", "pins.json"]
    assert set(json.loads((target / "pins.json").read_text())) == {"gfpgan_1.4"}
