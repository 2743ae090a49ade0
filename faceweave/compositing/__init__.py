"""Compositing: a swapper's output made into the target crop, then pasted back.

Pure functions on the working crop, one concern per module:

- :mod:`~faceweave.compositing.masks`: generic mask operations (combine by
  minimum, feather, box, polygon, connectivity, thin dark lines);
- :mod:`~faceweave.compositing.regions`: regions of a face drawn from its mesh
  (skin, features, mouth, rim, forehead, the lower face);
- :mod:`~faceweave.compositing.skin`: the skin-colour model and the masks it
  gives (bare skin versus hair, hands and other occluders);
- :mod:`~faceweave.compositing.colour`: CIELAB colour statistics and transfer,
  a face's skin colour and its side lighting;
- :mod:`~faceweave.compositing.occlusion`: what covers a face (the source's
  clean map, the target's occluders, glasses, face masks);
- :mod:`~faceweave.compositing.resample`: maps made at half resolution and
  brought back;
- :mod:`~faceweave.compositing.blend`: the multi-band blend, paste-back and
  detail matching;
- :mod:`~faceweave.compositing.values`: the frozen values passed between the
  steps (:class:`~faceweave.compositing.values.Composite`);
- :mod:`~faceweave.compositing.composite`: :func:`composite` itself, the steps
  in order.
"""
