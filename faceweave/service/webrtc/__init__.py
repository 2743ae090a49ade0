"""Live sessions over WebRTC: the browser's camera goes to the server on a
peer connection (aiortc), each frame is swapped by a
:class:`~faceweave.live.session.LiveSession` (the video pipeline's frame
stream with a latest-frame-wins queue: stale frames are dropped and counted,
faces tracked across the drops), and the swapped frames come back on the
same connection, with the browser's microphone when it sends one.

- :mod:`~faceweave.service.webrtc.stats`: what a session measures (frames
  received, swapped, dropped; fps; latency) and exports to ``/metrics``.
- :mod:`~faceweave.service.webrtc.sdp`: an offer's lines checked before
  aiortc reads them, each problem said in our words (a 422, never a 500).
- :mod:`~faceweave.service.webrtc.peer`: one peer connection and its
  session (:class:`~faceweave.service.webrtc.peer.PeerSession`).
- :mod:`~faceweave.service.webrtc.hub`: the node's sessions and the models
  they borrow (:class:`~faceweave.service.webrtc.hub.LiveHub`).
- :mod:`~faceweave.service.webrtc.places`: the places they hold, capped by
  ``live.sessions`` and per caller by ``live.sessions_per_caller``, and the
  reservations that hold one for a session to come.
- :mod:`~faceweave.service.webrtc.ice`: the ICE servers of each side, TURN
  with time-limited credentials made for one session (coturn's ``use-auth-secret``).
- :mod:`~faceweave.service.webrtc.sync`: the microphone's sound held to the
  swapped video (:class:`~faceweave.service.webrtc.sync.AvSync`).
- :mod:`~faceweave.service.webrtc.routes`: ``/v1/live`` and the page ``/live``.

aiortc is imported only where a peer connection is made (the ``webrtc`` extra)."""
