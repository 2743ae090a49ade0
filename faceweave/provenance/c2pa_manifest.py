"""Optional C2PA manifest (``pip install 'faceweave[c2pa]'``: c2pa-python and cryptography).

:class:`C2paSigner` signs files offline with a locally generated ES256 key
and a two-certificate chain (a local CA and a signing certificate), made once
and kept in a folder the caller chooses.  The manifest says ``c2pa.created``
with the IPTC digital source type ``trainedAlgorithmicMedia``.  Readers
validate the signature but report the local CA as untrusted
(``signingCredential.untrusted``): that is expected without a public CA.
"""

from __future__ import annotations

import datetime
import io
import os
from pathlib import Path

from faceweave.errors import ModelNotFoundError, OutputError
from faceweave.io.atomic import atomic_output
from faceweave.provenance.label import TRAINED_ALGORITHMIC_MEDIA, Label

#: output extension -> MIME type c2pa signs
MIME_TYPES = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".webp": "image/webp",
    ".mp4": "video/mp4",
}
_KEY, _CHAIN = "signer.key.pem", "signer.chain.pem"


def available() -> bool:
    """Whether c2pa-python and cryptography are installed."""
    import importlib.util

    return all(importlib.util.find_spec(m) is not None for m in ("c2pa", "cryptography"))


def manifest_for(label: Label, title: str) -> dict:
    """The manifest definition (pure)."""
    return {
        "claim_generator_info": [{"name": label.tool, "version": label.version}],
        "title": title,
        "assertions": [
            {
                "label": "c2pa.actions",
                "data": {
                    "actions": [
                        {
                            "action": "c2pa.created",
                            "digitalSourceType": label.digital_source_type or TRAINED_ALGORITHMIC_MEDIA,
                        }
                    ]
                },
            }
        ],
    }


class C2paSigner:
    """Signs files with the key and chain in ``folder`` (made on first use, key file mode 0600)."""

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        if not available():
            raise ModelNotFoundError("C2PA manifests need c2pa-python: pip install 'faceweave[c2pa]'")
        self.folder = Path(folder)
        self._signer = None

    def _credentials(self) -> tuple[bytes, bytes]:
        key, chain = self.folder / _KEY, self.folder / _CHAIN
        if not (key.is_file() and chain.is_file()):
            self.folder.mkdir(parents=True, exist_ok=True)
            key_pem, chain_pem = make_credentials()
            with atomic_output(chain) as temp:
                temp.write_bytes(chain_pem)
            with atomic_output(key) as temp:
                os.chmod(temp, 0o600)
                temp.write_bytes(key_pem)
        return key.read_bytes(), chain.read_bytes()

    def sign(self, path: str | os.PathLike[str], label: Label) -> None:
        """Embed a signed manifest in the file at ``path`` (replaced atomically)."""
        import c2pa

        target = Path(path)
        mime = MIME_TYPES.get(target.suffix.lower())
        if mime is None:
            raise OutputError(f"cannot attach a C2PA manifest to '{target}': {target.suffix} is not supported")
        if self._signer is None:
            key, chain = self._credentials()
            info = c2pa.C2paSignerInfo(c2pa.C2paSigningAlg.ES256, chain, key, None)
            self._signer = c2pa.Signer.from_info(info)
        source, signed = io.BytesIO(target.read_bytes()), io.BytesIO()
        try:
            with c2pa.Builder(manifest_for(label, target.name)) as builder:
                builder.sign(self._signer, mime, source, signed)
        except c2pa.C2paError as exc:
            raise OutputError(f"cannot attach a C2PA manifest to '{target}': {exc}") from exc
        with atomic_output(target, ".tmp" + target.suffix) as temp:
            temp.write_bytes(signed.getvalue())

    def close(self) -> None:
        if self._signer is not None:
            self._signer.close()
            self._signer = None


def read_manifest(path: str | os.PathLike[str]) -> dict | None:
    """``{"state": validation state, "manifest": active manifest}``, or ``None`` when the file has none."""
    import c2pa

    target = Path(path)
    mime = MIME_TYPES.get(target.suffix.lower())
    if mime is None:
        return None
    try:
        with open(target, "rb") as fh, c2pa.Reader(mime, fh) as reader:
            return {"state": reader.get_validation_state(), "manifest": reader.get_active_manifest()}
    except c2pa.C2paError:
        return None


def _subject(cn: str):
    """An X.509 name: ``cn`` of the local faceweave organisation."""
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    return x509.Name(
        [
            x509.NameAttribute(NameOID.COMMON_NAME, cn),
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "faceweave (local)"),
        ]
    )


def _key_usage(*, sign: bool):
    """A CA's key usage (``sign``: certificates and CRLs) or a signer's (digital signatures)."""
    from cryptography import x509

    return x509.KeyUsage(
        digital_signature=not sign,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=sign,
        crl_sign=sign,
        encipher_only=False,
        decipher_only=False,
    )


def make_credentials(*, days: int = 3650) -> tuple[bytes, bytes]:
    """A new P-256 key (PKCS#8 PEM) and its chain (signing certificate, then the local CA)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID

    name, usage = _subject, _key_usage
    now = datetime.datetime.now(datetime.UTC)
    ca_key, ee_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())

    def common(b: x509.CertificateBuilder) -> x509.CertificateBuilder:
        return (
            b.serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=days))
        )

    ca = (
        common(x509.CertificateBuilder())
        .subject_name(name("faceweave local CA"))
        .issuer_name(name("faceweave local CA"))
        .public_key(ca_key.public_key())
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(usage(sign=True), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    ee = (
        common(x509.CertificateBuilder())
        .subject_name(name("faceweave signer"))
        .issuer_name(ca.subject)
        .public_key(ee_key.public_key())
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(usage(sign=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.EMAIL_PROTECTION]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ee_key.public_key()), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    key = ee_key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    return key, ee.public_bytes(pem) + ca.public_bytes(pem)
