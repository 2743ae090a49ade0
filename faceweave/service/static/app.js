// The faceweave web page: plain JavaScript over the same /v1 API as any client.
// Flow: choose sources and a target -> POST /v1/faces shows the faces -> tick
// faces -> POST /v1/jobs -> poll GET /v1/jobs/{id} -> preview -> download.
"use strict";

(() => {
  const KEY_STORE = "faceweave.apiKey";
  const ACTIVE = new Set(["queued", "running"]);
  const POLL_MS = 500;
  const JOBS_MS = 2000;
  const $ = (id) => document.getElementById(id);

  const state = {
    faces: [], size: [0, 0], kind: null, job: null, pollTimer: null, jobsTimer: null,
    targetUrl: null, previewUrl: null, previewFor: null, downloadUrl: null, detecting: null,
  };

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

  function authHeaders() {
    const key = apiKey();
    return key ? { Authorization: "Bearer " + key } : {};
  }

  async function api(path, init = {}) {
    let response;
    try {
      response = await fetch(path, { ...init, headers: { ...authHeaders(), ...(init.headers || {}) } });
    } catch (err) {
      throw new ApiError(0, "network_error", "cannot reach the server (" + err.message + ")");
    }
    if (!response.ok) throw await errorOf(response);
    return response;
  }

  async function errorOf(response) {
    let code = "http_" + response.status;
    let message = response.statusText || "the request failed";
    try {
      const body = await response.json();
      if (body && body.error) ({ code, message } = body.error);
    } catch (_) { /* not JSON: keep the status text */ }
    if (response.status === 401) showKeySection("This server requires an API key or token: " + message);
    return new ApiError(response.status, code, message);
  }

  function showMessage(text, kind = "error") {
    const box = $("message");
    box.textContent = text;
    box.className = "message " + kind;
    box.hidden = false;
  }

  function clearMessage() {
    $("message").hidden = true;
    $("message").textContent = "";
  }

  function report(err, what) {
    const detail = err instanceof ApiError ? `${err.message} [${err.code}]` : String(err);
    showMessage(`${what}: ${detail}`);
  }

  // ------------------------------------------------------------ API key
  function showKeySection(hint) {
    $("key-section").hidden = false;
    if (hint) $("key-hint").textContent = hint;
  }

  function saveKey(event) {
    event.preventDefault();
    const key = $("api-key").value.trim();
    try {
      if (key) localStorage.setItem(KEY_STORE, key); else localStorage.removeItem(KEY_STORE);
    } catch (_) { showMessage("This browser does not allow storing the key."); return; }
    $("api-key").value = "";
    $("key-hint").textContent = key ? "Key saved in this browser." : "No key saved.";
    clearMessage();
    refreshJobs();
  }

  function forgetKey() {
    try { localStorage.removeItem(KEY_STORE); } catch (_) { /* nothing stored */ }
    $("key-hint").textContent = "Key forgotten.";
  }

  // ------------------------------------------------------------ faces
  function isVideo(file) {
    return !!file && (file.type.startsWith("video/") || /\.(mp4|m4v|mov|mkv|webm|avi)$/i.test(file.name));
  }

  function resetFaces(text) {
    state.faces = [];
    state.kind = null;
    $("face-list").replaceChildren();
    $("face-buttons").hidden = true;
    $("stage").hidden = true;
    $("faces-status").textContent = text;
  }

  async function detectFaces() {
    const file = $("target").files[0];
    $("trim-field").hidden = !isVideo(file);
    if (!file) { resetFaces("Choose a target to see its faces."); return; }
    // keep the old faces on screen while looking: a layout that jumps under the
    // pointer would swallow the click that took the focus from the trim field
    $("faces-status").textContent = "Finding faces…";
    const form = new FormData();
    form.append("target", file);
    const trim = $("trim").value.trim();
    if (isVideo(file) && trim) form.append("trim", trim);
    try {
      const body = await (await api("/v1/faces", { method: "POST", body: form })).json();
      if ($("target").files[0] !== file) return; // another target was chosen meanwhile
      showFaces(body, file);
    } catch (err) {
      if (err.status === 503) {
        resetFaces("Face detection is not available right now; the largest face will be replaced.");
      } else {
        resetFaces("Could not find faces: " + err.message);
        report(err, "Finding faces failed");
      }
    }
  }

  function showFaces(body, file) {
    state.faces = body.faces;
    state.size = [body.width, body.height];
    state.kind = body.kind;
    if (state.targetUrl) URL.revokeObjectURL(state.targetUrl);
    state.targetUrl = body.frame ? null : URL.createObjectURL(file);
    const image = $("target-image");
    image.onload = drawFaces;
    image.src = body.frame || state.targetUrl;
    $("stage").hidden = false;
    const list = $("face-list");
    list.replaceChildren(...body.faces.map(faceChoice));
    $("face-buttons").hidden = body.faces.length < 2;
    const where = body.kind === "video" ? ` in the frame at ${body.frame_time} s` : "";
    $("faces-status").textContent = body.faces.length
      ? `${body.faces.length} face(s) found${where}, largest first. Tick the faces to replace.`
      : `No face found${where}. The swap will fail unless the target shows a face.`;
  }

  function faceChoice(face) {
    const label = document.createElement("label");
    label.className = "face-choice";
    const box = document.createElement("input");
    box.type = "checkbox";
    box.id = "face-" + face.index;
    box.value = String(face.index);
    box.checked = face.index === 0;
    box.addEventListener("change", drawFaces);
    label.append(box, ` Face ${face.index} (${Math.round(face.size)} px, score ${face.score.toFixed(2)})`);
    return label;
  }

  function chosenFaces() {
    return state.faces.map((f) => f.index).filter((i) => $("face-" + i) && $("face-" + i).checked);
  }

  function drawFaces() {
    const image = $("target-image");
    const canvas = $("face-canvas");
    canvas.width = image.clientWidth;
    canvas.height = image.clientHeight;
    const scale = state.size[0] ? image.clientWidth / state.size[0] : 1;
    const ctx = canvas.getContext("2d");
    ctx.clearRect(0, 0, canvas.width, canvas.height);
    ctx.font = "bold 14px system-ui, sans-serif";
    const chosen = new Set(chosenFaces());
    for (const face of state.faces) {
      const [x1, y1, x2, y2] = face.box.map((v) => v * scale);
      const on = chosen.has(face.index);
      ctx.lineWidth = on ? 3 : 2;
      ctx.setLineDash(on ? [] : [6, 4]);
      ctx.strokeStyle = on ? "#1a7f37" : "#f5f5f5";
      ctx.strokeRect(x1, y1, x2 - x1, y2 - y1);
      ctx.setLineDash([]);
      ctx.fillStyle = on ? "#1a7f37" : "#444";
      ctx.fillRect(x1, Math.max(0, y1 - 20), 26, 20);
      ctx.fillStyle = "#fff";
      ctx.fillText(String(face.index), x1 + 6, Math.max(15, y1 - 5));
    }
  }

  function toggleFaceAt(event) {
    const canvas = $("face-canvas");
    const rect = canvas.getBoundingClientRect();
    const scale = state.size[0] ? canvas.width / state.size[0] : 1;
    const x = (event.clientX - rect.left) / scale;
    const y = (event.clientY - rect.top) / scale;
    const hit = state.faces.find((f) => x >= f.box[0] && x <= f.box[2] && y >= f.box[1] && y <= f.box[3]);
    if (!hit) return;
    const box = $("face-" + hit.index);
    box.checked = !box.checked;
    drawFaces();
  }

  function setAllFaces(on) {
    for (const face of state.faces) $("face-" + face.index).checked = on;
    drawFaces();
  }

  // ------------------------------------------------------------ jobs
  function jobOptions(target) {
    const options = {};
    const format = $("format").value;
    if (format) options.format = format;
    const trim = $("trim").value.trim();
    if (isVideo(target) && trim) options.trim = trim;
    if (state.faces.length) {
      const chosen = chosenFaces();
      if (!chosen.length) throw new Error("Tick at least one face to replace.");
      if (chosen.length === state.faces.length && chosen.length > 1) {
        options.faces = "many";
      } else {
        options.faces = "index";
        options.face_index = chosen;
      }
    }
    return options;
  }

  async function startJob(event) {
    event.preventDefault();
    clearMessage();
    const sources = Array.from($("sources").files);
    const target = $("target").files[0];
    if (!sources.length) { showMessage("Choose at least one source photo."); return; }
    if (!target) { showMessage("Choose a target photo or video."); return; }
    await state.detecting; // the faces ticked must be the faces of this target
    let options;
    try { options = jobOptions(target); } catch (err) { showMessage(err.message); return; }
    const form = new FormData();
    for (const file of sources) form.append("source", file);
    form.append("target", target);
    form.append("options", JSON.stringify(options));
    const button = $("start");
    button.disabled = true;
    button.textContent = "Uploading…";
    try {
      const job = await (await api("/v1/jobs", { method: "POST", body: form })).json();
      followJob(job);
      refreshJobs();
    } catch (err) {
      report(err, "The job was not started");
    } finally {
      button.disabled = false;
      button.textContent = "Start swap";
    }
  }

  function followJob(job) {
    clearTimeout(state.pollTimer);
    state.job = job.id;
    if (state.previewUrl) URL.revokeObjectURL(state.previewUrl);
    if (state.downloadUrl) URL.revokeObjectURL(state.downloadUrl);
    state.previewUrl = state.previewFor = state.downloadUrl = null;
    $("preview-figure").hidden = true;
    $("download").hidden = true;
    $("job-section").hidden = false;
    showJob(job);
  }

  async function pollJob(id) {
    if (state.job !== id) return;
    try {
      showJob(await (await api(`/v1/jobs/${id}`)).json());
    } catch (err) {
      report(err, "Cannot follow the job");
    }
  }

  function showJob(job) {
    if (state.job !== job.id) return;
    $("job-state").textContent = `Job ${job.id.slice(0, 8)}: ${job.state}`;
    $("progress").value = job.state === "succeeded" ? 100 : job.progress || 0;
    $("progress").textContent = `${Math.round(job.progress || 0)}%`;
    const parts = [`${(job.state === "succeeded" ? 100 : job.progress || 0).toFixed(0)}%`];
    if (job.frames_total) parts.push(`frame ${job.frames_done} of ${job.frames_total}`);
    else if (job.frames_done) parts.push(`${job.frames_done} frames`);
    if (job.eta_s != null && ACTIVE.has(job.state)) parts.push("about " + duration(job.eta_s) + " left");
    if (job.result && job.result.faces_swapped != null) parts.push(`${job.result.faces_swapped} face(s) swapped`);
    if (job.error) parts.push(`error: ${job.error.message} [${job.error.code}]`);
    $("job-detail").textContent = parts.join(" · ");
    if (job.links.preview && state.previewFor !== job.id + job.state) loadPreview(job);
    if (job.state === "succeeded") offerDownload(job);
    if (job.state === "failed" && job.error) showMessage(`The job failed: ${job.error.message} [${job.error.code}]`);
    if (ACTIVE.has(job.state)) {
      clearTimeout(state.pollTimer);
      state.pollTimer = setTimeout(() => pollJob(job.id), POLL_MS);
    } else {
      refreshJobs();
    }
  }

  async function loadPreview(job) {
    // the preview of a running job may change: fetch it again once the job has finished
    if (ACTIVE.has(job.state) && state.previewFor && state.previewFor.startsWith(job.id)) return;
    state.previewFor = job.id + job.state;
    try {
      const blob = await (await api(job.links.preview)).blob();
      if (state.job !== job.id) return;
      if (state.previewUrl) URL.revokeObjectURL(state.previewUrl);
      state.previewUrl = URL.createObjectURL(blob);
      $("preview").src = state.previewUrl;
      $("preview-figure").hidden = false;
    } catch (err) {
      if (err.status !== 409) report(err, "Cannot load the preview");
    }
  }

  function offerDownload(job) {
    const link = $("download");
    if (!link.hidden) return;
    if (apiKey()) {
      link.download = `faceweave-${job.id.slice(0, 8)}.${extensionOf(job)}`;
      // the result needs the key header: fetch it, then hand the browser a blob
      link.href = "#";
      link.onclick = (event) => { event.preventDefault(); downloadWithKey(job, link); };
    } else {
      link.href = job.links.result; // the server names the file (Content-Disposition)
      link.setAttribute("download", "");
      link.onclick = null;
    }
    link.hidden = false;
  }

  async function downloadWithKey(job, link) {
    try {
      const blob = await (await api(job.links.result)).blob();
      if (state.downloadUrl) URL.revokeObjectURL(state.downloadUrl);
      state.downloadUrl = URL.createObjectURL(blob);
      const save = document.createElement("a");
      save.href = state.downloadUrl;
      save.download = link.download;
      document.body.append(save);
      save.click();
      save.remove();
    } catch (err) {
      report(err, "The download failed");
    }
  }

  function extensionOf(job) {
    if (job.result && job.result.format) return job.result.format;
    if (job.options && job.options.format) return job.options.format;
    return job.kind === "video" ? "mp4" : "png";
  }

  function duration(seconds) {
    const s = Math.max(0, Math.round(seconds));
    return s < 60 ? `${s} s` : `${Math.floor(s / 60)} min ${s % 60} s`;
  }

  // ------------------------------------------------------------ job list
  async function refreshJobs() {
    clearTimeout(state.jobsTimer);
    let jobs;
    try {
      jobs = (await (await api("/v1/jobs")).json()).jobs;
    } catch (err) {
      if (err.status !== 401) report(err, "Cannot list your jobs");
      return;
    }
    $("jobs-body").replaceChildren(...jobs.map(jobRow));
    $("jobs-empty").hidden = jobs.length > 0;
    if (jobs.some((j) => ACTIVE.has(j.state))) state.jobsTimer = setTimeout(refreshJobs, JOBS_MS);
  }

  function jobRow(job) {
    const row = document.createElement("tr");
    row.dataset.job = job.id;
    const created = job.created_at ? new Date(job.created_at).toLocaleString() : "";
    for (const text of [job.id.slice(0, 8), job.kind, job.state, `${Math.round(job.progress || 0)}%`, created]) {
      const cell = document.createElement("td");
      cell.textContent = text;
      row.append(cell);
    }
    const actions = document.createElement("td");
    actions.append(button("Show", `Show job ${job.id.slice(0, 8)}`, () => followJob(job)));
    const active = ACTIVE.has(job.state);
    actions.append(button(active ? "Cancel" : "Delete", `${active ? "Cancel" : "Delete"} job ${job.id.slice(0, 8)}`,
      () => removeJob(job)));
    row.append(actions);
    return row;
  }

  function button(text, label, onClick) {
    const b = document.createElement("button");
    b.type = "button";
    b.textContent = text;
    b.setAttribute("aria-label", label);
    b.addEventListener("click", onClick);
    return b;
  }

  async function removeJob(job) {
    try {
      const body = await (await api(`/v1/jobs/${job.id}`, { method: "DELETE" })).json();
      showMessage(body.deleted ? `Job ${job.id.slice(0, 8)} deleted.` : `Job ${job.id.slice(0, 8)} cancelled.`, "info");
      if (state.job === job.id) {
        state.job = null;
        clearTimeout(state.pollTimer);
        $("job-section").hidden = true;
      }
    } catch (err) {
      report(err, "Cannot cancel the job");
    }
    refreshJobs();
  }

  // ------------------------------------------------------------ start
  function init() {
    $("key-form").addEventListener("submit", saveKey);
    $("forget-key").addEventListener("click", forgetKey);
    const detect = () => { state.detecting = detectFaces(); };
    $("target").addEventListener("change", detect);
    $("trim").addEventListener("change", detect);
    $("face-canvas").addEventListener("click", toggleFaceAt);
    $("select-all").addEventListener("click", () => setAllFaces(true));
    $("select-none").addEventListener("click", () => setAllFaces(false));
    $("job-form").addEventListener("submit", startJob);
    $("refresh-jobs").addEventListener("click", refreshJobs);
    window.addEventListener("resize", drawFaces);
    if (apiKey()) showKeySection("A key is saved in this browser.");
    refreshJobs();
  }

  init();
})();
