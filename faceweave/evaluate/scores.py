"""The figures of one swap pair: image metrics (pose, expression, outside
PSNR, tone, seam, blotches, sharpness) on the masks of
:mod:`faceweave.evaluate.regions`, and identity metrics against the other
photos' embeddings.  Pure functions."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from faceweave.evaluate import metrics as M
from faceweave.evaluate import regions as R
from faceweave.evaluate.pairs import Photo, SwapPair, independent_photos, other_photos
from faceweave.evaluate.report import EvaluationSettings
from faceweave.evaluate.tone import tone_shift
from faceweave.types import Face


def image_metrics(
    target: np.ndarray, target_face: Face, result: np.ndarray, result_face: Face, *, settings: EvaluationSettings
) -> dict[str, Any]:
    """Pose, expression, psnr_outside, tone (error and signed Lab vector),
    seam, blotch and sharpness of one swap: ``target`` and ``result`` are
    ``(H, W, 3)`` uint8 RGB, the faces are the target's face and the matching
    face found in the result."""
    shape = target.shape
    target_inner = R.inner_skin_mask(target_face, shape)
    result_inner = R.inner_skin_mask(result_face, shape)
    border = R.seam_border(
        result,
        target,
        threshold=settings.seam_threshold,
        width=settings.seam_border_width,
        within=R.box_mask(shape, target_face.bbox, scale=settings.seam_box_scale),
    )
    expression = M.expression_differences(result_face.require_mesh(), target_face.require_mesh())
    tone = tone_shift(result, target, target_face.require_mesh(), result_face.require_mesh(), settings=settings.tone)
    return {
        "pose_error": M.pose_error(result_face.pose, target_face.pose),
        "expression_error": max(expression.as_tuple()),
        "mouth_open_error": expression.mouth_open,
        "mouth_width_error": expression.mouth_width,
        "eye_open_error": expression.eye_open,
        "psnr_outside": M.psnr(
            result, target, R.outside_box_mask(shape, target_face.bbox, scale=settings.psnr_box_scale)
        ),
        "tone_error": None if tone is None else float(np.linalg.norm(tone)),
        "tone_dlab": None if tone is None else tuple(float(v) for v in tone),
        "seam_ratio": M.seam_ratio(result, target, border),
        "blotch_fraction": M.blotch_excess(
            result,
            target,
            result_mask=result_inner,
            target_mask=target_inner,
            sigma=max(settings.blotch_sigma * target_face.size, 1.0),
            threshold=settings.blotch_delta_e,
        ),
        "sharpness_ratio": M.face_sharpness_ratio(result, target, target_face.require_mesh()),
    }


def identity_metrics(
    embedding: np.ndarray | None,
    pair: SwapPair,
    photos: Sequence[Photo],
    embeddings: Mapping[str, np.ndarray],
) -> dict[str, Any]:
    """id_dist_source, id_dist_target, nearest_identity and retrieval of the
    result's ``(128,)`` embedding.  ``embeddings`` maps photo files to their
    largest face's embedding (photos without a face are absent).

    References leave out the pair's photos: the source person's mean is over
    their other photos, the target person's over theirs, and the retrieval
    centroids (every identity's mean) over all photos but the two used."""
    if embedding is None:
        return {"id_dist_source": None, "id_dist_target": None, "nearest_identity": None, "retrieval": None}

    def centroid(identity: str, exclude: set[str]) -> np.ndarray | None:
        refs = [embeddings[p.file] for p in other_photos(photos, identity, exclude=exclude) if p.file in embeddings]
        return M.mean_embedding(refs)

    used = {pair.source.file, pair.target.file}
    src = centroid(pair.source.identity, {pair.source.file})
    tgt = centroid(pair.target.identity, {pair.target.file})
    centroids = {}
    for identity in sorted({p.identity for p in independent_photos(photos)}):
        c = centroid(identity, used)
        if c is not None:
            centroids[identity] = c
    nearest = M.nearest_identity(embedding, centroids)
    return {
        "id_dist_source": None if src is None else M.embedding_distance(embedding, src),
        "id_dist_target": None if tgt is None else M.embedding_distance(embedding, tgt),
        "nearest_identity": nearest,
        "retrieval": None
        if nearest is None or pair.source.identity not in centroids
        else nearest == pair.source.identity,
    }
