"""People of a video (identity clusters) and the per-person source map."""

from __future__ import annotations

import numpy as np
import pytest

from faceweave.video.people import Person, assign


def unit(i: int) -> np.ndarray:
    v = np.zeros(128, np.float32)
    v[i] = 1.0
    return v


def test_assign_groups_close_embeddings_and_opens_new_people():
    people: list[Person] = []
    a = assign(people, unit(0))
    a.embeddings.append(unit(0))
    assert assign(people, unit(0) + 0.01) is a
    b = assign(people, unit(1))  # distance sqrt(2): another person
    assert b is not a and [p.index for p in people] == [0, 1]


def test_people_map_person_of():
    from faceweave.video.pipeline import PeopleMap

    mapping = PeopleMap(centres=np.stack([unit(0), unit(1)]), sources={})
    assert mapping.person_of(unit(1) + 0.01) == 1
    assert mapping.person_of(unit(5)) is None
    assert PeopleMap(centres=np.zeros((0, 128), np.float32), sources={}).person_of(unit(0)) is None


@pytest.mark.slow
def test_people_of_a_real_clip_and_the_sheet(faces_dir):
    from faceweave.analysis import FaceAnalyser
    from faceweave.video.people import find_people, people_sheet

    with FaceAnalyser() as analyser:
        people = find_people(faces_dir / "video/short_hamilton_clip.mp4", analyser, every=1.0)
    assert len(people) >= 2
    counts = [len(p.times) for p in people]
    assert counts == sorted(counts, reverse=True) and [p.index for p in people] == list(range(len(people)))
    sheet = people_sheet(people)
    assert sheet.ndim == 3 and sheet.dtype == np.uint8


@pytest.mark.slow
@pytest.mark.parametrize(
    "args, fragments",
    [
        (["--map", "9=SRC"], ["--map 9", "the video has people"]),
        (["--map", "nonsense"], ["INDEX=PHOTO"]),
        ([], ["--source"]),
        (["--map", "0=SRC", "-s", "SRC"], ["either --source or --map"]),
    ],
)
def test_map_errors(tmp_path, faces_dir, args, fragments):
    from tests.test_cli import assert_clean_error, faceweave

    source = str(faces_dir / "single/biden2.jpg")
    args = [a.replace("SRC", source) for a in args]
    out = tmp_path / "out.mp4"
    proc = faceweave("swap", "-t", faces_dir / "video/short_hamilton_clip.mp4", "-o", out, *args)
    assert_clean_error(proc, 2, *fragments)
    assert not out.exists()


@pytest.mark.slow
def test_map_with_preview_and_a_short_run(tmp_path, faces_dir):
    from tests.test_cli import faceweave

    from faceweave.io import read_image

    out, preview = tmp_path / "out.mp4", tmp_path / "preview.png"
    proc = faceweave(
        "swap",
        "-t",
        faces_dir / "video/short_hamilton_clip.mp4",
        "-o",
        out,
        "--trim",
        "0-1",
        "--map",
        f"0={faces_dir / 'single/biden2.jpg'}",
        "--preview",
        preview,
        "--json",
    )
    assert proc.returncode == 0, proc.stderr
    assert out.is_file() and preview.is_file()
    assert read_image(preview).pixels.shape[:2] == (360, 640)
