"""Live mode: swap faces in a camera, a network stream or a file played at
its own rate, in real time (``faceweave live``).

A :class:`~faceweave.live.session.LiveSession` runs the video pipeline's
frame stream with a live source and a latest-frame-wins queue, so that the
delay stays bounded however slow the swap; it is independent of the
transport: :class:`~faceweave.live.reader.LiveReader` reads cameras and
streams through PyAV, :class:`~faceweave.live.endpoints.PushSource` takes
frames another transport decoded; outputs are recordings and network pushes
(:class:`~faceweave.live.muxer.StreamMuxer`), a virtual camera
(:class:`~faceweave.live.endpoints.VirtualCamera`) and the newest frame for
a reader such as a preview window (:class:`~faceweave.live.endpoints.LatestFrame`).

Modules are imported where used (PyAV and the models load only then)."""
