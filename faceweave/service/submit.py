"""From a received upload to work: the files sorted into roles
(:func:`sort_roles`), then a synchronous swap (:func:`swap_now`, for
``POST /v1/swap``) or a queued job (:func:`queue_job`, for ``POST /v1/jobs``).

Both run on a worker thread of the server (they read files and the database).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from faceweave.errors import InvalidOptionError, NotReadyError, StorageUnavailableError, UnsupportedFormatError
from faceweave.service.auth import Caller
from faceweave.service.jobdata import ImageResult, InputFile, JobInputs, JobState
from faceweave.service.jobs import JobOutcome, swap_image, write_audit
from faceweave.service.jobspec import JobOptions, keeps_faces
from faceweave.service.node import Service
from faceweave.service.settings import LimitSettings
from faceweave.service.store import JobRecord, new_job_id
from faceweave.service.uploads import UploadedFile, UploadedForm, check_markable, inspect_upload

log = logging.getLogger("faceweave.service")
#: the part names of source photos (``sources`` as well, for clients that pluralise)
SOURCE_PARTS = ("source", "sources")


@dataclass(frozen=True)
class UploadRoles:
    """The checked files of one upload by role: ``map``: the photos of each
    person INDEX of a video target (instead of ``sources``)."""

    sources: list[UploadedFile]
    target: UploadedFile
    reference: UploadedFile | None
    map: dict[int, list[UploadedFile]]

    def by_role(self) -> list[tuple[str, UploadedFile]]:
        """``(role, file)`` for every file, as the audit log names the roles."""
        items = [("source", f) for f in self.sources] + [("target", self.target)]
        items += [("reference", self.reference)] if self.reference else []
        return items + [(f"map.{i}", f) for i, group in self.map.items() for f in group]

    def files_record(self, stored: dict[int, str]) -> list[InputFile]:
        """The audit record of every file; ``stored``: stored paths by ``id()`` of the file."""
        return [
            InputFile(role=role, path=stored.get(id(f), ""), sha256=f.sha256, filename=f.filename)
            for role, f in self.by_role()
        ]


def sort_roles(form: UploadedForm, limits: LimitSettings, min_side: int = 0) -> UploadRoles:
    """Check every file by content and sort them into roles; ``min_side``:
    the target's least side (the watermark's, when marking is on).  With
    swapper ``none`` (:func:`~faceweave.service.jobspec.keeps_faces`) no
    source photo is taken.

    Raises:
        InvalidOptionError: an unknown part, or parts that do not make one job.
        UnsupportedFormatError: a photo role given something else.
    """
    checked = {name: [inspect_upload(f, limits) for f in files] for name, files in form.files.items()}
    form.files = checked
    targets = checked.get("target", [])
    references = checked.get("reference", [])
    mapping = _map_parts(checked)  # an unknown part is the first thing said
    if len(targets) != 1:
        raise InvalidOptionError("send exactly one 'target' file")
    check_markable(targets[0], min_side)
    if len(references) > 1:
        raise InvalidOptionError("send at most one 'reference' file")
    roles = UploadRoles(
        sources=[f for name in SOURCE_PARTS for f in checked.get(name, [])],
        target=targets[0],
        reference=references[0] if references else None,
        map=mapping,
    )
    _check_roles(roles, keeps=keeps_faces(form.fields))
    return roles


def _map_parts(checked: dict[str, list[UploadedFile]]) -> dict[int, list[UploadedFile]]:
    """The ``map.<INDEX>`` parts by INDEX; any other unknown part name is refused."""
    mapping: dict[int, list[UploadedFile]] = {}
    for name, files in checked.items():
        if name in (*SOURCE_PARTS, "target", "reference"):
            continue
        prefix, _, index = name.partition(".")
        if prefix != "map" or not (index.isascii() and index.isdigit() and len(index) <= 6):  # not "²", not 10**5000
            raise InvalidOptionError(f"unknown file part '{name[:60]}'; use source, target, reference or map.<INDEX>")
        mapping[int(index)] = files
    return mapping


def _check_roles(roles: UploadRoles, *, keeps: bool = False) -> None:
    for item in [*roles.sources, *([roles.reference] if roles.reference else []), *_flat(roles.map)]:
        if item.kind != "image":
            raise UnsupportedFormatError(f"'{item.field}' must be a photo, not a {item.kind}")
    if keeps:
        if roles.sources or roles.map:
            raise InvalidOptionError("swapper 'none' keeps the faces: send no 'source' or 'map.<INDEX>' photos")
        return
    if not roles.sources and not roles.map:
        raise InvalidOptionError("send a 'source' photo (or, for a video, 'map.<INDEX>' photos)")
    if roles.sources and roles.map:
        raise InvalidOptionError("send either 'source' photos or 'map.<INDEX>' photos, not both")
    if roles.map and roles.target.kind != "video":
        raise InvalidOptionError("'map.<INDEX>' photos are for video targets")


def _flat(mapping: dict[int, list[UploadedFile]]) -> list[UploadedFile]:
    return [f for group in mapping.values() for f in group]


def mark_side(service: Service) -> int:
    """The least side a target needs: the watermark's when marking is on."""
    from faceweave.provenance.watermark import MIN_SIDE

    return MIN_SIDE if service.settings.watermark else 0


@dataclass(frozen=True)
class SwappedImage:
    """A synchronous swap's answer: the encoded image, its format and what was done."""

    data: bytes
    format: str
    result: ImageResult


def swap_now(service: Service, caller: Caller, options: JobOptions, roles: UploadRoles) -> SwappedImage:
    """Swap one photo with a borrowed model slot, answering the image; audited
    like a job (except when no slot was free).

    Raises:
        NotReadyError: no slot came free within ``sync_wait_s``.
    """
    fmt = options.output_format("image")
    swap_options = options.swap_options(
        kind="image",
        has_reference=roles.reference is not None,
        max_pixels=service.config.max_pixels,
        video_working_size=service.config.video_working_size,
        runtime=service.config.runtime,
    )
    relative = service.storage.relative
    inputs = JobInputs(
        sources=[relative(f.path) for f in roles.sources],
        target=relative(roles.target.path),
        reference=relative(roles.reference.path) if roles.reference else None,
        files=roles.files_record({}),
    )
    job = JobRecord(
        id=new_job_id(),
        owner=caller.owner,
        kind="image",
        state=JobState.RUNNING,
        options=options.model_dump(exclude_defaults=True),
        inputs=inputs,
        created_at=0.0,
    )
    provenance = service.config.provenance()
    output = service.storage.scratch_path(f".{fmt}")
    error: BaseException | None = None
    try:
        with service.slots.borrow(service.settings.sync_wait_s) as models:
            swapper = models.swapper(swap_options)
            result = swap_image(
                inputs, swapper, storage=service.storage, options=options, output=output, provenance=provenance
            )
        data = output.read_bytes()
        service.metrics.faces.inc(result.faces_swapped)
        return SwappedImage(data=data, format=fmt, result=result)
    except BaseException as exc:
        error = exc
        raise
    finally:
        output.unlink(missing_ok=True)
        if not isinstance(error, NotReadyError):
            outcome = JobOutcome(state="failed" if error else "succeeded", seconds=0.0)
            write_audit(service.audit, job, outcome=outcome, error=error, provenance=provenance, hide=service.hide)


def queue_job(service: Service, caller: Caller, options: JobOptions, roles: UploadRoles, kind: str) -> JobRecord:
    """Move the uploaded files into a new job's folder and queue the job (its
    folder is removed again when queueing fails).

    Raises:
        StorageUnavailableError: the storage stopped answering; no job was created.
    """
    job_id = new_job_id()
    stored: dict[int, str] = {}

    def keep(item: UploadedFile, name: str) -> str:
        stored[id(item)] = service.storage.adopt(item.path, job_id, name)
        return stored[id(item)]

    try:
        sources = [keep(f, f"source-{i}") for i, f in enumerate(roles.sources)]
        target = keep(roles.target, "target")
        reference = keep(roles.reference, "reference") if roles.reference else None
        mapping = {i: [keep(f, f"map-{i}-{n}") for n, f in enumerate(group)] for i, group in roles.map.items()}
        inputs = JobInputs(
            sources=sources, target=target, reference=reference, map=mapping, files=roles.files_record(stored)
        )
        return service.store.create(
            job_id=job_id,
            owner=caller.owner,
            kind=kind,
            options=options.model_dump(exclude_defaults=True),
            inputs=inputs,
        )
    except BaseException:
        discard_files(service, job_id)
        raise


def discard_files(service: Service, job_id: str) -> None:
    """Delete a job's files as far as the storage answers; what it cannot
    delete now the sweeper deletes (``orphan_grace_s`` after, once no row has the id)."""
    try:
        service.storage.remove_job(job_id)
    except StorageUnavailableError:
        log.warning("job %s: its files stay until the storage answers and the sweeper removes them", job_id)
