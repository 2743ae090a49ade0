"""The model registry: specs of known models, the cache folder, downloads and imports.

``ModelSpec`` describes a model as data; ``builtin_specs()`` is the catalog;
``ModelStore`` finds files in the XDG cache folder; ``download_model`` and
``import_model`` put them there.  Nothing here imports onnxruntime.
"""

from faceweave.models.cache import ModelStore, Pin, default_models_dir, sha256_file
from faceweave.models.catalog import builtin_specs, find_spec
from faceweave.models.download import download_model, fetch_file
from faceweave.models.importer import import_model
from faceweave.models.signature import Signature, check_signature, read_signature
from faceweave.models.spec import KINDS, ModelSpec, TensorSpec

__all__ = [
    "KINDS",
    "ModelSpec",
    "ModelStore",
    "Pin",
    "Signature",
    "TensorSpec",
    "builtin_specs",
    "check_signature",
    "default_models_dir",
    "download_model",
    "fetch_file",
    "find_spec",
    "import_model",
    "read_signature",
    "sha256_file",
]
