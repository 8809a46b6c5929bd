/* pt2doctor report script: inlined into report.html.
 * Contract: user data only ever reaches the DOM through textContent / createTextNode (never
 * innerHTML), payloads are parsed from <script type="application/json"> blocks only when their
 * section is opened, and nothing is fetched from the network.
 */
(function () {
  "use strict";
  var TOKEN = new RegExp([
    "(#[^\\n]*)",                                                        // 1 comment
    "(\"\"\"[\\s\\S]*?\"\"\"|'''[\\s\\S]*?'''|\"(?:\\\\.|[^\"\\\\\\n])*\"|'(?:\\\\.|[^'\\\\\\n])*')", // 2 string
    "\\b(\\d+(?:\\.\\d+)?(?:e[+-]?\\d+)?)\\b",                            // 3 number
    "\\b(def|class|return|if|else|elif|for|while|in|not|and|or|is|None|True|False|import|from|as|with|" +
      "lambda|yield|try|except|finally|raise|pass|break|continue|global|nonlocal|del|assert|async|await|self)\\b", // 4 keyword
    "(@[\\w.]+)",                                                        // 5 decorator
    "((?:torch\\.ops\\.)?aten\\.[\\w.]+|\\b[A-Za-z_]\\w*(?=\\())"          // 6 call / aten op
  ].join("|"), "g");
  var CLASSES = [null, "c", "s", "n", "k", "d", "f"];

  function highlight(text, lang) {
    var frag = document.createDocumentFragment();
    if (lang !== "python" || text.length > 2000000) { frag.appendChild(document.createTextNode(text)); return frag; }
    var last = 0, m;
    TOKEN.lastIndex = 0;
    while ((m = TOKEN.exec(text)) !== null) {
      if (m[0].length === 0) { TOKEN.lastIndex++; continue; }
      if (m.index > last) frag.appendChild(document.createTextNode(text.slice(last, m.index)));
      var span = document.createElement("span");
      for (var g = 1; g < CLASSES.length; g++) { if (m[g] !== undefined) { span.className = CLASSES[g]; break; } }
      span.textContent = m[0];
      frag.appendChild(span);
      last = m.index + m[0].length;
    }
    if (last < text.length) frag.appendChild(document.createTextNode(text.slice(last)));
    return frag;
  }

  function highlightInPlace(el) {
    var text = el.textContent;
    el.textContent = "";
    el.appendChild(highlight(text, el.getAttribute("data-lang") || "python"));
    el.classList.add("hl");
  }

  function payload(ref) {
    var node = document.getElementById(ref);
    return node ? JSON.parse(node.textContent) : null;
  }

  function fmtBytes(n) {
    if (n < 1024) return n + " B";
    if (n < 1048576) return (n / 1024).toFixed(0) + " KB";
    return (n / 1048576).toFixed(1) + " MB";
  }

  function fillArtifact(details) {
    if (details.getAttribute("data-loaded")) return;
    details.setAttribute("data-loaded", "1");
    var body = details.querySelector(".art-body");
    var data = payload(details.getAttribute("data-ref"));
    if (!data) { body.textContent = "(payload missing)"; return; }
    if (data.truncated) {
      var note = document.createElement("div");
      note.className = "trunc";
      note.textContent = "truncated: showing the first " + fmtBytes(data.text.length) + " of " + fmtBytes(data.size) +
        " (the full text is in the trace)";
      body.appendChild(note);
    }
    var pre = document.createElement("pre");
    pre.className = "code hl";
    pre.appendChild(highlight(data.text, "python"));
    body.appendChild(pre);
  }

  function openTarget() {
    var id = decodeURIComponent(location.hash.slice(1));
    var el = id && document.getElementById(id);
    if (!el || el.tagName !== "DETAILS") return;
    document.querySelectorAll("details.cid.target").forEach(function (d) { d.classList.remove("target"); });
    el.open = true;
    el.classList.add("target");
    var first = el.querySelector("details.art");
    if (first && !first.open) first.open = true;
    el.scrollIntoView({block: "start"});
  }

  function filterCompiles(query) {
    var q = query.trim().toLowerCase();
    document.querySelectorAll("details.cid").forEach(function (d) {
      d.style.display = !q || d.getAttribute("data-filter").toLowerCase().indexOf(q) >= 0 ? "" : "none";
    });
  }

  document.addEventListener("toggle", function (e) {
    var d = e.target;
    if (d.tagName === "DETAILS" && d.open && d.classList.contains("art")) fillArtifact(d);
  }, true);
  window.addEventListener("hashchange", openTarget);
  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll(".hl[data-lang]").forEach(highlightInPlace);
    var filter = document.getElementById("cid-filter");
    if (filter) filter.addEventListener("input", function () { filterCompiles(filter.value); });
    openTarget();
  });
})();
