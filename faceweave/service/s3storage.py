"""Object storage: :class:`S3Storage` keeps uploads, previews, results and
video segments in an S3 bucket (AWS, MinIO, Ceph, ...), so that API nodes and
workers on different machines share nothing but the database, the broker and
the bucket.

* Keys are ``<prefix>/<key>`` for the storage's keys (``jobs/<id>/target``, ...).
* A runner works on local copies in its own folder under the local storage's
  ``scratch`` (one per process, so processes never delete each other's):
  :meth:`S3Storage.resolve` downloads an input there, a result written there
  is uploaded by :meth:`S3Storage.publish`, and :meth:`S3Storage.workspace`
  deletes the job's copies when its last user leaves.
* Uploads are streamed (:func:`upload_stream`): one ``PUT`` for a small file,
  else a multipart upload of ``s3.part_size_mb`` parts (one part in memory),
  completed only at the end and aborted on any error, so an object is either
  whole or absent: nothing half-written is ever visible.
* Results are fetched by clients directly, through presigned URLs
  (:meth:`S3Storage.download_url`) that expire no later than their job.

boto3 (``pip install 'faceweave[s3]'``) is imported only when S3 is used.
"""

from __future__ import annotations

import os
import secrets
import shutil
import threading
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from faceweave.errors import InvalidOptionError, ServiceError
from faceweave.service.s3outage import BucketProbe, storage_errors
from faceweave.service.storage import ATTEMPT_FILE, JOB_ID, STORAGE_NAME, LocalStorage

if TYPE_CHECKING:
    from faceweave.service.settings import S3Settings

MIB = 1024 * 1024
_MISSING = ("404", "NoSuchKey", "NotFound")
_CREDENTIALS_HINT = "set s3.access_key_id and s3.secret_access_key, or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY"


def s3_client(
    settings: S3Settings, *, attempts: int = 3, endpoint_url: str | None = None, timeout_s: float | None = None
) -> Any:
    """A boto3 S3 client: the explicit settings, else boto3's own chain
    (environment, ``~/.aws``); region ``us-east-1`` when none is found.
    ``endpoint_url`` replaces ``settings.endpoint_url`` (the public one, for signing);
    ``timeout_s`` replaces both the connect and the read timeout (the probe's)."""
    try:
        import boto3
        from botocore.config import Config
    except ImportError as exc:
        raise InvalidOptionError("s3:// storage needs boto3: pip install 'faceweave[s3]'") from exc
    session = boto3.session.Session(
        aws_access_key_id=settings.access_key_id,
        aws_secret_access_key=settings.secret_access_key,
        region_name=settings.region,
    )
    config = Config(
        signature_version="s3v4",
        connect_timeout=settings.connect_timeout_s if timeout_s is None else timeout_s,
        read_timeout=60 if timeout_s is None else timeout_s,
        retries={"max_attempts": attempts, "mode": "standard"},
        s3={"addressing_style": settings.addressing_style},
    )
    return session.client(
        "s3",
        endpoint_url=endpoint_url or settings.endpoint_url,
        region_name=session.region_name or "us-east-1",
        config=config,
    )


def error_code(exc: BaseException) -> str:
    """The S3 error code of a botocore ``ClientError`` ("" for anything else)."""
    response = getattr(exc, "response", None)
    return str((response or {}).get("Error", {}).get("Code", "")) if isinstance(response, dict) else ""


def check_bucket(settings: S3Settings) -> None:
    """Reach the bucket once (one try, short timeouts).

    Raises:
        ServiceError: no credentials, the endpoint does not answer, the bucket
            is missing, or access to it is denied (one line saying which).
    """
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

    client = s3_client(settings, attempts=1)
    bucket, where = settings.bucket, client.meta.endpoint_url
    try:
        client.head_bucket(Bucket=bucket)
    except NoCredentialsError as exc:
        raise ServiceError(f"no S3 credentials for bucket '{bucket}': {_CREDENTIALS_HINT}") from exc
    except ClientError as exc:
        code = error_code(exc)
        if code in ("404", "NoSuchBucket"):
            raise ServiceError(f"S3 bucket '{bucket}' does not exist at {where}; create it or check --storage") from exc
        if code in ("403", "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidClientTokenId"):
            raise ServiceError(
                f"S3 access to bucket '{bucket}' at {where} was denied ({code}); check the credentials: "
                f"{_CREDENTIALS_HINT}"
            ) from exc
        raise ServiceError(f"S3 bucket '{bucket}' at {where} answered {code or exc}") from exc
    except BotoCoreError as exc:
        reason = " ".join(str(exc).split()) or type(exc).__name__
        raise ServiceError(
            f"cannot reach the S3 endpoint {where} ({reason}); start it or check s3.endpoint_url / AWS_ENDPOINT_URL"
        ) from exc


def upload_stream(client: Any, stream: BinaryIO, *, bucket: str, key: str, part_size: int) -> None:
    """Store what ``stream`` holds as ``key``, visible only once complete: one
    ``PUT`` when it fits in one part, else a multipart upload completed at the
    end and aborted on any error (also KeyboardInterrupt)."""
    first = stream.read(part_size)
    if len(first) < part_size:
        client.put_object(Bucket=bucket, Key=key, Body=first)
        return
    upload_id = client.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
    try:
        parts: list[dict[str, Any]] = []
        chunk = first
        while chunk:
            number = len(parts) + 1
            answer = client.upload_part(Bucket=bucket, Key=key, UploadId=upload_id, PartNumber=number, Body=chunk)
            parts.append({"PartNumber": number, "ETag": answer["ETag"]})
            chunk = stream.read(part_size)
        client.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=upload_id, MultipartUpload={"Parts": parts})
    except BaseException:
        with suppress(Exception):
            client.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload_id)
        raise


class S3Storage(LocalStorage):
    """Job files in ``settings.url``'s bucket; ``local``: the local folder for
    uploads being received, scratch files and this process's working copies.
    Safe to share between threads (boto3 clients are)."""

    def __init__(self, settings: S3Settings, *, local: str | os.PathLike[str], client: Any = None) -> None:
        super().__init__(local)
        self.settings = settings
        self.bucket, self.prefix = settings.bucket, settings.prefix
        self.client = client if client is not None else s3_client(settings)
        #: signs download URLs for the endpoint clients reach (signing needs no network)
        self.signer = (
            s3_client(settings, endpoint_url=settings.public_endpoint_url)
            if settings.public_endpoint_url
            else (self.client)
        )
        #: this process's working copies (``jobs/<id>/...`` as in the bucket)
        self.copies = self.scratch / f"s3-{os.getpid()}-{secrets.token_hex(4)}"
        self._users: dict[str, int] = {}
        self._lock = threading.Lock()
        prober = client if client is not None else s3_client(settings, attempts=1, timeout_s=settings.probe_timeout_s)
        #: whether the bucket answers, for /readyz and before changes (``check``)
        self.probe = BucketProbe(prober, self.bucket, cache_s=settings.probe_cache_s)

    def _errors(self) -> AbstractContextManager[None]:
        """An outage inside becomes :class:`~faceweave.errors.StorageUnavailableError` (and the probe's verdict)."""
        return storage_errors(self.probe.saw_outage)

    def check(self) -> None:
        """Raises :class:`~faceweave.errors.StorageUnavailableError` while the bucket does not answer."""
        self.probe.check()

    # ------------------------------------------------------------ keys and paths
    def key(self, relative: str) -> str:
        return f"{self.prefix}/{relative}" if self.prefix else relative

    def job_dir(self, job_id: str) -> Path:
        """The local folder of the job's working copies (created)."""
        folder = self.copies / super().job_dir(job_id).relative_to(self.root)
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    def relative(self, path: Path) -> str:
        path = Path(path).resolve()
        base = self.copies if path.is_relative_to(self.copies) else self.root
        return path.relative_to(base).as_posix()

    def _local(self, relative: str) -> Path:
        base = self.copies if relative.startswith("jobs/") else self.root
        path = (base / relative).resolve()
        if base not in path.parents:
            raise InvalidOptionError(f"stored path {relative!r} is outside the storage")
        return path

    def resolve(self, relative: str) -> Path:
        """A local path for the stored file: downloaded first when it is in the
        bucket and not here yet; else where it is to be written."""
        path = self._local(relative)
        if relative.startswith("jobs/") and not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            self._download(self.key(relative), path)
        return path

    def _download(self, key: str, path: Path) -> None:
        from botocore.exceptions import ClientError

        partial = path.with_name(f".{path.name}.{secrets.token_hex(4)}.part")
        try:
            with self._errors():
                self.client.download_file(self.bucket, key, str(partial))
        except ClientError as exc:
            partial.unlink(missing_ok=True)
            if error_code(exc) not in _MISSING:
                raise
            return
        except BaseException:
            partial.unlink(missing_ok=True)
            raise
        os.replace(partial, path)

    # ------------------------------------------------------------ writing
    def adopt(self, upload: Path, job_id: str, name: str) -> str:
        """Upload a received file as the job's ``name``; the local file is deleted."""
        if not STORAGE_NAME.match(name):
            raise InvalidOptionError(f"not a storage name: {name!r}")
        relative = f"jobs/{super().job_dir(job_id).name}/{name}"
        self._put(upload, relative)
        upload.unlink(missing_ok=True)
        return relative

    def publish(self, path: Path) -> str:
        """Upload the finished file ``path`` (under :meth:`job_dir`) to its key; returns the key."""
        relative = self.relative(path)
        if not relative.startswith("jobs/"):
            raise InvalidOptionError(f"only a job's files are published, not {relative!r}")
        self._put(path, relative)
        return relative

    def _put(self, path: Path, relative: str) -> None:
        with open(path, "rb") as stream, self._errors():
            upload_stream(
                self.client,
                stream,
                bucket=self.bucket,
                key=self.key(relative),
                part_size=self.settings.part_size_mb * MIB,
            )

    # ------------------------------------------------------------ deleting
    def delete(self, relative: str) -> None:
        self._local(relative).unlink(missing_ok=True)
        if relative.startswith("jobs/"):
            with self._errors():
                self.client.delete_object(Bucket=self.bucket, Key=self.key(relative))

    def remove_tree(self, relative: str) -> None:
        shutil.rmtree(self._local(relative), ignore_errors=True)
        with self._errors():
            self._delete_keys(self._keys(self.key(relative.rstrip("/") + "/")))

    def remove_job(self, job_id: str) -> None:
        super().remove_job(job_id)
        with self._errors():
            self._delete_keys(self._keys(self.key(f"jobs/{super().job_dir(job_id).name}/")))

    def discard_attempts(self, job_id: str, *, before: int) -> int:
        """The local copies' and the bucket's files of attempts under ``before``."""
        super().discard_attempts(job_id, before=before)
        folder = self.key(f"jobs/{super().job_dir(job_id).name}/")
        doomed, entries = [], set()
        with self._errors():
            for key in self._keys(folder):
                name = key[len(folder) :]
                match = ATTEMPT_FILE.match(name)
                if match is not None and int(match[1]) < before:
                    doomed.append(key)
                    entries.add(name.split("/")[0])
            self._delete_keys(doomed)
        return len(entries)

    def _keys(self, prefix: str) -> Iterator[str]:
        for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix):
            yield from (item["Key"] for item in page.get("Contents", ()))

    def _delete_keys(self, keys: Iterator[str] | list[str]) -> None:
        batch: list[str] = []
        for key in [*keys, None]:
            if key is not None:
                batch.append(key)
            if batch and (key is None or len(batch) == 1000):
                objects = [{"Key": k} for k in batch]
                self.client.delete_objects(Bucket=self.bucket, Delete={"Objects": objects, "Quiet": True})
                batch = []

    # ------------------------------------------------------------ working copies
    @contextmanager
    def workspace(self, job_id: str) -> Iterator[None]:
        """Keep the job's local copies while inside; the last one out deletes them."""
        with self._lock:
            self._users[job_id] = self._users.get(job_id, 0) + 1
        try:
            yield
        finally:
            with self._lock:
                self._users[job_id] -= 1
                last = self._users[job_id] == 0
                if last:
                    del self._users[job_id]
            if last:
                shutil.rmtree(self.job_dir(job_id), ignore_errors=True)

    # ------------------------------------------------------------ reading and expiry
    def download_url(self, relative: str, *, filename: str, media_type: str, expires_s: float) -> str | None:
        """A presigned ``GET`` of the file, valid ``expires_s`` (at most ``s3.url_expiry_s``)."""
        seconds = max(1, int(min(expires_s, self.settings.url_expiry_s)))
        params = {
            "Bucket": self.bucket,
            "Key": self.key(relative),
            "ResponseContentDisposition": f'attachment; filename="{filename}"',
            "ResponseContentType": media_type,
        }
        return str(self.signer.generate_presigned_url("get_object", Params=params, ExpiresIn=seconds))

    def sweep(self, *, older_than_s: float, now: float | None = None) -> int:
        """Stale local uploads and scratch files, and multipart uploads that a
        killed process left unfinished (invisible, but stored and billed)."""
        now = time.time() if now is None else now
        removed = super().sweep(older_than_s=older_than_s, now=now)
        pages = self.client.get_paginator("list_multipart_uploads").paginate(Bucket=self.bucket, Prefix=self.key(""))
        with self._errors():
            for page in pages:
                for upload in page.get("Uploads", ()):
                    if upload["Initiated"].timestamp() < now - older_than_s:
                        with suppress(Exception):
                            self.client.abort_multipart_upload(
                                Bucket=self.bucket, Key=upload["Key"], UploadId=upload["UploadId"]
                            )
                            removed += 1
        return removed

    def job_ids(self, *, idle_s: float, now: float | None = None) -> Iterator[str]:
        """The ids under ``jobs/`` in the bucket whose newest object is older than ``idle_s``."""
        now = time.time() if now is None else now
        folder, newest = self.key("jobs/"), dict[str, float]()
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=folder)
        with self._errors():
            for page in pages:
                for item in page.get("Contents", ()):
                    job_id = item["Key"][len(folder) :].split("/", 1)[0]
                    if JOB_ID.match(job_id):
                        newest[job_id] = max(newest.get(job_id, 0.0), item["LastModified"].timestamp())
        yield from (job_id for job_id, at in newest.items() if at < now - idle_s)

    def close(self) -> None:
        """Delete this process's working copies."""
        shutil.rmtree(self.copies, ignore_errors=True)
