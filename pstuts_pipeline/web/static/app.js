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
  if (source && moment.player.kind === "video") {
    video.hidden = false;
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

function showAnswer(reply) {
  $("answer").textContent = reply.answer;
  const how = reply.model ? "written by " + reply.model : "extractive: the best-matching sentence";
  $("answer-meta").textContent = how + (reply.error ? " (chat model failed: " + reply.error + ")" : "");
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
    item.append(
      momentButton(result),
      element("span", result.title, "title"),
      element("span", " · chunk " + result.chunk_mmss + " · score " + result.score.toFixed(2), "meta"),
      chunk,
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
    $("status").textContent = status.problem
      ? status.problem
      : status.points + " chunks in " + status.collection + " · answers: " + status.answers;
    if (status.problem) showError(status.problem);
  } catch (error) {
    $("status").textContent = "The server could not be reached.";
  }
}

document.addEventListener("DOMContentLoaded", () => {
  $("ask-form").addEventListener("submit", ask);
  showStatus();
});
