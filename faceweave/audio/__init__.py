"""Speech for the lip syncer: an audio file read at 48 kHz
(:mod:`~faceweave.audio.reading`), the voice taken out of music and noise
by a voice extractor model (:mod:`~faceweave.audio.voice`), its mel
spectrogram and the window of it that goes with each video frame
(:mod:`~faceweave.audio.features`, :class:`~faceweave.audio.speech.Speech`),
as FaceFusion 3.x computes them for its ``lip_syncer``."""
