// The faceweave Live page: the camera goes to the server over WebRTC
// (POST /v1/live with the offer and the source photo), the swapped video comes
// back on the same peer connection; a new source photo while live goes to
// POST /v1/live/{id}/source (the photos chosen are kept on the page, to go
// back to one with a click); with "microphone" its sound is sent too and comes
// back on the same stream as the swapped video; the place and its ICE servers
// (STUN, TURN with time-limited credentials made for that session) come from
// POST /v1/live/reservations, whose id the offer names; the figures
// are the browser's (frames decoded, round trip) and the server's
// (GET /v1/live/{id}: swap latency, drops).
"use strict";

(() => {
  const KEY_STORE = "faceweave.apiKey"; // the same key as the main page
  const STATS_MS = 1000;
  const GATHER_MS = 3000;
  const RECENT_MAX = 6; // source photos kept on the page (in memory only: never stored)
  const $ = (id) => document.getElementById(id);
  const state = { pc: null, camera: null, session: null, timer: null, last: null, recent: [], current: null };

  // ------------------------------------------------------------ API access
  class ApiError extends Error {
    constructor(status, code, message) {
      super(message);
      this.status = status;
      this.code = code;
    }
  }

  function apiKey() {
    try { return localStorage.getItem(KEY_STORE) || ""; } catch (_) { return ""; }
  }

  async function api(path, init = {}) {
    const key = apiKey();
    const headers = key ? { Authorization: "Bearer " + key } : {};
    let response;
    try {
      response = await fetch(path, { ...init, headers });
    } catch (err) {
      throw new ApiError(0, "network_error", "cannot reach the server (" + err.message + ")");
    }
    if (response.ok) return response;
    let code = "http_" + response.status;
    let message = response.statusText || "the request failed";
    try {
      const body = await response.json();
      if (body && body.error) ({ code, message } = body.error);
    } catch (_) { /* not JSON: keep the status text */ }
    if (response.status === 401) $("key-section").hidden = false;
    throw new ApiError(response.status, code, message);
  }

  function showMessage(text, kind = "error") {
    const box = $("message");
    box.textContent = text;
    box.className = "message " + kind;
    box.hidden = false;
  }

  function report(err, what) {
    const detail = err instanceof ApiError ? `${err.message} [${err.code}]` : String(err.message || err);
    showMessage(`${what}: ${detail}`);
  }

  function saveKey(event) {
    event.preventDefault();
    const key = $("api-key").value.trim();
    try {
      if (key) localStorage.setItem(KEY_STORE, key); else localStorage.removeItem(KEY_STORE);
    } catch (_) { showMessage("This browser does not allow storing the key."); return; }
    $("api-key").value = "";
    $("key-hint").textContent = key ? "Key saved in this browser." : "No key saved.";
  }

  // ------------------------------------------------------------ the session
  function setState(text) { $("live-state").textContent = text; }

  function gathered(pc) {
    // the server takes the whole offer at once: wait for the candidates (or a bound)
    if (pc.iceGatheringState === "complete") return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => { if (pc.iceGatheringState === "complete") resolve(); };
      pc.addEventListener("icegatheringstatechange", done);
      setTimeout(resolve, GATHER_MS);
    });
  }

  // ------------------------------------------------------------ sources
  // Every photo chosen on the page is kept (the last RECENT_MAX, as object
  // URLs of the files, for this visit only) and shown as a button: choosing
  // one makes it the source again, at once when live.  A photo the server
  // refuses (no face in it) goes from the list, and the one before stays.
  function sameFile(a, b) {
    return a.name === b.name && a.size === b.size && a.lastModified === b.lastModified;
  }

  function remember(file) {
    const at = state.recent.findIndex((entry) => sameFile(entry.file, file));
    const entry = at >= 0 ? state.recent.splice(at, 1)[0] : { file, url: URL.createObjectURL(file) };
    state.recent.unshift(entry);
    while (state.recent.length > RECENT_MAX) URL.revokeObjectURL(state.recent.pop().url);
    return entry;
  }

  function forget(entry) {
    const at = state.recent.indexOf(entry);
    if (at >= 0) URL.revokeObjectURL(state.recent.splice(at, 1)[0].url);
  }

  function showRecent() {
    const box = $("live-recent");
    box.replaceChildren();
    for (const entry of state.recent) {
      const button = document.createElement("button");
      button.type = "button";
      button.className = "recent-source";
      button.title = entry.file.name;
      button.setAttribute("aria-pressed", String(entry === state.current));
      const image = document.createElement("img");
      image.src = entry.url;
      image.alt = entry.file.name;
      button.append(image);
      button.addEventListener("click", () => useSource(entry, false));
      box.append(button);
    }
    $("live-recent-field").hidden = state.recent.length === 0;
  }

  async function useSource(entry, fresh) {
    const before = state.current;
    state.current = entry;
    showRecent();
    if (!state.session) return;
    const form = new FormData();
    form.append("source", entry.file);
    try {
      await api(state.session.links.source, { method: "POST", body: form });
      showMessage(`Source changed to ${entry.file.name}.`, "info");
    } catch (err) {
      if (fresh) forget(entry);
      state.current = before && state.recent.includes(before) ? before : null;
      showRecent();
      report(err, "The source was not changed");
    }
  }

  async function start() {
    $("message").hidden = true;
    const chosen = $("live-source").files[0];
    if (!state.current && chosen) state.current = remember(chosen);
    const photo = state.current ? state.current.file : null;
    if (!photo) { showMessage("Choose a source photo first: the face to put in."); return; }
    showRecent();
    $("live-start").disabled = true;
    try {
      const audio = $("live-audio").checked;
      setState(audio ? "Starting the camera and the microphone…" : "Starting the camera…");
      state.camera = await navigator.mediaDevices.getUserMedia({ video: true, audio });
      $("camera").srcObject = state.camera;
      // a place held for this session, with its ICE servers (TURN with credentials made for it alone)
      const place = await (await api("/v1/live/reservations", { method: "POST" })).json();
      const pc = state.pc = new RTCPeerConnection({
        iceServers: place.ice_servers,
        iceTransportPolicy: place.ice_transport_policy,
      });
      for (const track of state.camera.getTracks()) pc.addTrack(track, state.camera);
      // the swapped video and, with the microphone, its sound: one stream, played in sync
      $("swapped").muted = !audio;
      pc.ontrack = (event) => { $("swapped").srcObject = event.streams[0] || new MediaStream([event.track]); };
      pc.onconnectionstatechange = () => onConnection(pc);
      await pc.setLocalDescription(await pc.createOffer());
      await gathered(pc);
      setState("Connecting…");
      const form = new FormData();
      form.append("source", photo);
      form.append("sdp", pc.localDescription.sdp);
      form.append("type", "offer");
      form.append("reservation", place.id);
      state.session = await (await api("/v1/live", { method: "POST", body: form })).json();
      await pc.setRemoteDescription({ type: "answer", sdp: state.session.sdp });
      setState(`Live session ${state.session.id.slice(0, 8)}: connecting…`);
      $("live-stop").disabled = false;
      state.timer = setInterval(showFigures, STATS_MS);
    } catch (err) {
      report(err, "The live session did not start");
      await stop(true); // a session the server opened is ended too
    }
  }

  function onConnection(pc) {
    if (pc !== state.pc) return;
    if (pc.connectionState === "connected" && state.session) {
      setState(`Live session ${state.session.id.slice(0, 8)}: live`);
    } else if (pc.connectionState === "failed") {
      showMessage("The connection to the server failed (WebRTC needs UDP between this browser and the server).");
      stop(true);
    }
  }

  async function stop(tell = true) {
    clearInterval(state.timer);
    state.timer = null;
    const session = state.session;
    state.session = null;
    if (tell && session) {
      try { await api(session.links.self, { method: "DELETE" }); } catch (_) { /* it may have ended already */ }
    }
    if (state.pc) state.pc.close();
    state.pc = null;
    if (state.camera) for (const track of state.camera.getTracks()) track.stop();
    state.camera = null;
    state.last = null;
    $("camera").srcObject = null;
    $("swapped").srcObject = null;
    $("live-start").disabled = false;
    $("live-stop").disabled = true;
    if (session) setState(`Live session ${session.id.slice(0, 8)} stopped.`);
  }

  async function changeSource() {
    const photo = $("live-source").files[0];
    if (!photo) return;
    const known = state.recent.some((entry) => sameFile(entry.file, photo));
    await useSource(remember(photo), !known);
  }

  // ------------------------------------------------------------ figures
  async function browserFigures(pc) {
    let decoded = null;
    let rtt = null;
    (await pc.getStats()).forEach((item) => {
      if (item.type === "inbound-rtp" && item.kind === "video") decoded = item.framesDecoded || 0;
      if (item.type === "candidate-pair" && item.nominated && item.currentRoundTripTime != null) {
        rtt = item.currentRoundTripTime * 1000;
      }
    });
    return { decoded, rtt, at: performance.now() };
  }

  function put(id, value, text) {
    $(id).dataset.value = String(value);
    $(id).textContent = text;
  }

  async function showFigures() {
    const { pc, session } = state;
    if (!pc || !session) return;
    const mine = await browserFigures(pc);
    if (mine.decoded != null) {
      put("live-frames", mine.decoded, String(mine.decoded));
      if (state.last && mine.at > state.last.at) {
        const fps = ((mine.decoded - state.last.decoded) * 1000) / (mine.at - state.last.at);
        put("live-fps", fps.toFixed(1), `${fps.toFixed(1)} fps`);
      }
      state.last = mine;
    }
    let server;
    try {
      server = await (await api(session.links.self)).json();
    } catch (err) {
      report(err, "Cannot read the session's figures");
      return;
    }
    if (server.state === "ended") {
      showMessage(`The live session ended: ${server.reason}`);
      await stop(false);
      return;
    }
    put("live-dropped", server.dropped, String(server.dropped));
    if (server.latency_p50_ms != null) {
      const network = mine.rtt != null ? mine.rtt : 0;
      const total = server.latency_p50_ms + network;
      put("live-latency", total.toFixed(0),
        `${total.toFixed(0)} ms (swap ${server.latency_p50_ms.toFixed(0)} ms + network round trip ${network.toFixed(0)} ms)`);
    }
  }

  // ------------------------------------------------------------ start
  function init() {
    $("key-form").addEventListener("submit", saveKey);
    $("live-start").addEventListener("click", start);
    $("live-stop").addEventListener("click", () => stop(true));
    $("live-source").addEventListener("change", changeSource);
    window.addEventListener("pagehide", () => { if (state.session) stop(true); });
    if (!window.RTCPeerConnection || !navigator.mediaDevices) {
      showMessage("This browser cannot do WebRTC with a camera here (it needs https, or http on localhost).");
      $("live-start").disabled = true;
    }
  }

  init();
})();
