"""The evaluation set: photos labelled with identities, and swap pairs.

``identities.csv`` has the columns ``file`` (path relative to the CSV's
folder), ``identity`` and ``independent_photo`` (``yes``, or ``no (why)`` for
mirrored copies, crops of the same shot and the like, which must not count as
a second photo of a person).
"""

from __future__ import annotations

import csv
import json
import random
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from faceweave.errors import InputError, UnreadableFileError

REQUIRED_COLUMNS = ("file", "identity", "independent_photo")


@dataclass(frozen=True)
class Photo:
    """One labelled photo; ``file`` is relative to the data folder."""

    file: str
    identity: str
    independent: bool
    note: str = ""


@dataclass(frozen=True)
class SwapPair:
    """Swap the face of ``source`` (person A) into ``target`` (person B != A)."""

    index: int
    source: Photo
    target: Photo


def parse_independent(value: str) -> tuple[bool, str]:
    """``'yes'`` -> ``(True, '')``; ``'no (mirrored copy)'`` -> ``(False,
    'mirrored copy')``.  Anything else raises :class:`InputError`."""
    text = value.strip()
    low = text.lower()
    if low == "yes":
        return True, ""
    if low == "no" or low.startswith("no ") or low.startswith("no("):
        note = text[2:].strip()
        if note.startswith("(") and note.endswith(")"):
            note = note[1:-1].strip()
        return False, note
    raise InputError(f"independent_photo must be 'yes' or 'no (...)', got {value!r}")


def parse_identities(lines: Iterable[str], *, origin: str = "identities.csv") -> tuple[Photo, ...]:
    """Photos from the CSV text ``lines`` (header first), in file order.

    Raises :class:`InputError` on missing columns, empty fields, bad
    ``independent_photo`` values or a file listed twice."""
    reader = csv.DictReader(lines)
    missing = [c for c in REQUIRED_COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise InputError(f"{origin}: missing column(s) {', '.join(missing)}; need {', '.join(REQUIRED_COLUMNS)}")
    photos: list[Photo] = []
    seen: set[str] = set()
    for line_no, row in enumerate(reader, start=2):
        file, identity = (row.get("file") or "").strip(), (row.get("identity") or "").strip()
        if not file or not identity:
            raise InputError(f"{origin}:{line_no}: empty file or identity")
        if file in seen:
            raise InputError(f"{origin}:{line_no}: {file} is listed twice")
        seen.add(file)
        try:
            independent, note = parse_independent(row.get("independent_photo") or "")
        except InputError as exc:
            raise InputError(f"{origin}:{line_no}: {exc}") from None
        photos.append(Photo(file=file, identity=identity, independent=independent, note=note))
    return tuple(photos)


def read_identities(path: Path) -> tuple[Photo, ...]:
    """Read an ``identities.csv``; raises :class:`UnreadableFileError` when it
    cannot be read and :class:`InputError` when its content is wrong."""
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise UnreadableFileError(f"cannot read {path}: {exc.strerror or exc}") from exc
    return parse_identities(text.splitlines(), origin=str(path))


def independent_photos(photos: Iterable[Photo]) -> tuple[Photo, ...]:
    """The photos marked independent, in the given order."""
    return tuple(p for p in photos if p.independent)


def other_photos(photos: Iterable[Photo], identity: str, *, exclude: Collection[str] = ()) -> tuple[Photo, ...]:
    """Independent photos of ``identity`` whose file is not in ``exclude``."""
    excluded = set(exclude)
    return tuple(p for p in photos if p.independent and p.identity == identity and p.file not in excluded)


def eligible_sources(photos: Iterable[Photo]) -> tuple[Photo, ...]:
    """Independent photos whose person has at least one other independent photo."""
    indep = independent_photos(photos)
    counts = Counter(p.identity for p in indep)
    return tuple(p for p in indep if counts[p.identity] >= 2)


def build_pairs(photos: Sequence[Photo], *, count: int = 30, seed: int = 0) -> tuple[SwapPair, ...]:
    """Up to ``count`` distinct swap pairs, the same for the same photos and
    ``seed`` whatever the order of ``photos``.

    A source is an independent photo of a person with another independent
    photo (so their identity distance can be measured); a target is an
    independent photo of a different person.  Pairs are picked greedily to
    spread the work: each pick takes the candidate whose source person, then
    target person, then (source, target) person pair, then photos have been
    used least so far, ties broken by a seeded shuffle.  Fewer than ``count``
    pairs come back only when fewer distinct candidates exist.

    Raises :class:`InputError` when ``count < 1`` or no pair can be formed.
    """
    if count < 1:
        raise InputError(f"pairs must be >= 1, got {count}")
    ordered = sorted(photos, key=lambda p: (p.identity, p.file))
    sources = eligible_sources(ordered)
    targets = independent_photos(ordered)
    candidates = [(s, t) for s in sources for t in targets if t.identity != s.identity]
    if not candidates:
        raise InputError("no swap pair possible: need a person with two independent photos and another person with one")
    rng = random.Random(seed)
    rng.shuffle(candidates)
    rank = {(s.file, t.file): i for i, (s, t) in enumerate(candidates)}

    src_use: Counter[str] = Counter()
    tgt_use: Counter[str] = Counter()
    couple_use: Counter[tuple[str, str]] = Counter()
    photo_use: Counter[str] = Counter()
    remaining = list(candidates)
    chosen: list[SwapPair] = []
    while remaining and len(chosen) < count:
        best = min(
            remaining,
            key=lambda c: (
                src_use[c[0].identity],
                tgt_use[c[1].identity],
                couple_use[(c[0].identity, c[1].identity)],
                photo_use[c[0].file] + photo_use[c[1].file],
                rank[(c[0].file, c[1].file)],
            ),
        )
        remaining.remove(best)
        s, t = best
        src_use[s.identity] += 1
        tgt_use[t.identity] += 1
        couple_use[(s.identity, t.identity)] += 1
        photo_use[s.file] += 1
        photo_use[t.file] += 1
        chosen.append(SwapPair(index=len(chosen), source=s, target=t))
    return tuple(chosen)


def _pair_files(entry: object) -> tuple[str, str] | None:
    """``(source, target)`` files of one pair-list entry, ``None`` when it has not both."""
    if not isinstance(entry, Mapping):
        return None
    source, target = entry.get("source"), entry.get("target")
    if not (isinstance(source, str) and source and isinstance(target, str) and target):
        return None
    return source, target


def parse_pair_list(document: object, photos: Sequence[Photo], *, origin: str) -> tuple[SwapPair, ...]:
    """The pairs a report lists, in its order: ``document["pairs"]`` is a list
    of objects with ``source`` and ``target`` photo files (relative to the data
    folder).  The judge's ``results.json`` and faceweave's own ``report.json``
    both have that shape, so either reruns the same pairs.

    Raises :class:`InputError` when the list is missing or empty, an entry
    lacks a file, a file is not in ``photos`` or a pair is one person."""
    entries = document.get("pairs") if isinstance(document, Mapping) else None
    if not isinstance(entries, list) or not entries:
        raise InputError(f"{origin}: expected a non-empty list 'pairs' of {{source, target}} photo files")
    by_file = {p.file: p for p in photos}
    chosen: list[SwapPair] = []
    for i, entry in enumerate(entries):
        files = _pair_files(entry)
        if files is None:
            raise InputError(f"{origin}: pair {i} has no source and target photo file")
        unknown = [f for f in files if f not in by_file]
        if unknown:
            raise InputError(f"{origin}: pair {i}: {unknown[0]} is not listed in identities.csv")
        source, target = by_file[files[0]], by_file[files[1]]
        if source.identity == target.identity:
            raise InputError(f"{origin}: pair {i} swaps {source.identity} with themselves")
        chosen.append(SwapPair(index=i, source=source, target=target))
    return tuple(chosen)


def read_pair_list(path: Path, photos: Sequence[Photo]) -> tuple[SwapPair, ...]:
    """:func:`parse_pair_list` of a JSON file; raises
    :class:`UnreadableFileError` when it cannot be read or is not JSON."""
    try:
        document = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise UnreadableFileError(f"cannot read {path}: {exc.strerror or exc}") from exc
    except ValueError as exc:
        raise UnreadableFileError(f"{path} is not JSON: {exc}") from exc
    return parse_pair_list(document, photos, origin=str(path))
