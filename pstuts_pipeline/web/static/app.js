// The ask page: every value from the API is put in the page with textContent or as an attribute checked first,
// never as markup, since titles and transcripts are untrusted data.
"use strict";

const $ = (id) => document.getElementById(id);

// Only the server's own media route and http(s) URLs may become a src or href.
function safeSource(src) {
  if (typeof src !== "string") return null;
  if (/^\/media\/\d+(#t=\d+(\.\d+)?)?$/.test(src)) return src;
  try {
    const url = new URL(src);
    return url.protocol === "http:" || url.protocol === "https:" ? url.href : null;
  } catch (e) {
    return null;
  }
}

function element(tag, text, className) {
  const node = document.createElement(tag);
  if (text !== undefined) node.textContent = text;
  if (className) node.className = className;
  return node;
}

function showError(message) {
  $("error").textContent = message;
  $("error").hidden = !message;
}

function momentButton(moment) {
  const button = element("button", "▶ " + moment.mmss, "moment");
  button.type = "button";
  button.dataset.time = String(moment.time);
  button.addEventListener("click", () => play(moment));
  return button;
}

function play(moment) {
  const video = $("player");
  const source = moment.player && moment.player.kind !== "none" ? safeSource(moment.player.src) : null;
  $("player-box").hidden = false;
  $("now-playing").textContent = moment.title + " at " + moment.mmss;
  video.hidden = true;
  $("player-link").hidden = true;
  $("no-source").hidden = true;
  $("media-error").hidden = true;
  if (source && moment.player.kind === "video") {
    video.hidden = false;
    video.dataset.source = source;
    video.dataset.mmss = moment.mmss;
    video.dataset.time = String(moment.time);
    const start = () => {
      video.currentTime = moment.time;
      video.play().catch(() => {});
    };
    if (video.getAttribute("src") === source && video.readyState >= 1) {
      start();
    } else {
      video.addEventListener("loadedmetadata", start, { once: true });
      video.src = source;
    }
  } else if (source) {
    video.pause();
    $("open-link").href = source;
    $("open-link").textContent = "Open the video at " + moment.mmss + " (" + new URL(source).host + ")";
    $("player-link").hidden = false;
  } else {
    video.pause();
    $("no-source").hidden = false;
  }
}

// The browser could not play the source (e.g. a page that is not a video, a codec it lacks): say so, and link it.
function mediaFailed() {
  const video = $("player");
  const source = safeSource(video.dataset.source || "");
  if (!source || source.startsWith("/media/")) {
    $("media-error-text").textContent = "This video cannot be played here.";
    $("media-error-link").hidden = true;
  } else {
    $("media-error-text").textContent = "This video cannot be played here. ";
    $("media-error-link").href = source;
    $("media-error-link").textContent = "Open it at " + (video.dataset.mmss || "0:00") + " (" + new URL(source).host + ")";
    $("media-error-link").hidden = false;
  }
  video.hidden = true;
  $("media-error").hidden = false;
}

function percent(value) {
  return Math.round(100 * value) + "%";
}

// What a learner reads about a result: whether it likely answers, in words; the numbers are in its details.
function verdict(result) {
  return (result.weak ? "weak match (" : "match (") + percent(result.confidence) + ")";
}

function details(lines) {
  const box = element("details", undefined, "details");
  box.append(element("summary", "Details"));
  for (const line of lines) box.append(element("div", line, "meta"));
  return box;
}

function showAnswer(reply) {
  $("answer").textContent = reply.answer;
  $("answer").classList.toggle("weak", !reply.answered);
  const how = reply.model ? "written by " + reply.model : "the best-matching sentence of the videos";
  $("answer-meta").textContent = reply.answered
    ? how + " · confidence that a moment answers this: " + percent(reply.confidence) + (reply.error ? " (chat model failed: " + reply.error + ")" : "")
    : "The nearest moments are below, marked as weak matches: they may not answer your question.";
  $("results-title").textContent = reply.answered ? "Moments in the videos" : "Nearest moments (weak matches)";
  $("citations-title").hidden = !reply.citations.length;
  const citations = $("citations");
  citations.replaceChildren();
  for (const moment of reply.citations) {
    const item = element("li", undefined, "citation");
    item.append(momentButton(moment), element("span", moment.title, "title"));
    citations.append(item);
  }
  const results = $("results");
  results.replaceChildren();
  for (const result of reply.results) {
    const item = element("li", undefined, "result");
    const chunk = element("p", undefined, "chunk");
    chunk.append(result.before, element("mark", result.sentence), result.after);
    item.className = result.weak ? "result weak" : "result";
    item.append(
      momentButton(result),
      element("span", result.title, "title"),
      element("span", " · " + verdict(result), "verdict"),
      chunk,
      details([
        "video " + result.video_id + " · passage " + result.chunk_mmss,
        "confidence " + result.confidence.toFixed(3) + " (weak under " + reply.min_confidence + ") · search score " +
          result.score.toFixed(3),
      ]),
    );
    results.append(item);
  }
  for (const note of reply.notes) citations.append(element("li", note, "meta"));
  $("answer-box").dataset.question = reply.question;
  $("answer-box").hidden = false;
}

async function ask(event) {
  event.preventDefault();
  const question = $("question").value.trim();
  if (!question) return;
  showError("");
  $("ask").disabled = true;
  $("answer-box").setAttribute("aria-busy", "true");
  try {
    const response = await fetch("/api/ask", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ question: question }),
    });
    const body = await response.json();
    if (!response.ok) {
      // Our own errors carry one line; FastAPI's validation errors a list of them.
      const detail =
        typeof body.detail === "string"
          ? body.detail
          : Array.isArray(body.detail) && body.detail.length
            ? "The question was not accepted: " + body.detail[0].msg
            : "The question was not accepted.";
      showError(detail);
      return;
    }
    showAnswer(body);
  } catch (error) {
    showError("The server could not be reached: " + error.message);
  } finally {
    $("ask").disabled = false;
    $("answer-box").removeAttribute("aria-busy");
  }
}

async function showStatus() {
  try {
    const status = await (await fetch("/api/status")).json();
    // The problem is said once, as the error; the collection's figures are for those who open the details.
    $("status").textContent = status.problem
      ? "Not ready to answer yet."
      : "Ask a question: the answer plays the moment of the tutorial that says it.";
    $("status-details").textContent = status.points + " chunks in " + status.collection + " · answers: " + status.answers;
    if (status.problem) showError(status.problem);
  } catch (error) {
    $("status").textContent = "The server could not be reached.";
  }
}

document.addEventListener("DOMContentLoaded", () => {
  $("ask-form").addEventListener("submit", ask);
  $("player").addEventListener("error", mediaFailed);
  showStatus();
});
