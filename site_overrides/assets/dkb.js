/* The failure hub's own script: the paste box (`denpex-kb match` in the browser) and the all-entries filter.
 *
 * The matcher mirrors denpex_kb/matcher.py, normalize.py and paste.py over the compiled index that the build
 * exports as assets/dkb-match-index.json (denpex_kb/site/export.py). Nothing pasted leaves the page: the only
 * request is for that JSON file, of this site, before anything is pasted. Everything shown is written as text
 * (textContent) or as a link built here from a checked entry id; nothing is ever parsed as HTML.
 */
(function () {
  "use strict";

  // Python's str.isspace() set, which `\s` and str.strip() use in normalize.py.
  var PYWS = "\\t\\n\\v\\f\\r\\x1c-\\x1f \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000";
  var PYWS_RUN = new RegExp("[" + PYWS + "]+", "g");
  var PYWS_EDGE = new RegExp("^[" + PYWS + "]+|[" + PYWS + "]+$", "g");
  var LINE_BREAK = /\r\n|[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]/;
  var ENDS_WITH_BREAK = /(?:\r\n|[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029])$/;
  var WORD = /[\p{L}\p{N}_]+/gu; // Python's `\w+` on str
  var ID = /^[a-z0-9][a-z0-9-]{0,120}$/;

  function pyStrip(s) { return s.replace(PYWS_EDGE, ""); }

  function splitlines(text) { // str.splitlines()
    if (text === "") return [];
    var parts = text.split(LINE_BREAK);
    if (ENDS_WITH_BREAK.test(text)) parts.pop();
    return parts;
  }

  function cpLen(s) { // len() counts code points
    var n = s.length, pairs = s.match(/[\ud800-\udbff][\udc00-\udfff]/g);
    return pairs ? n - pairs.length : n;
  }

  function rstripNewlines(s) { return s.replace(/\n+$/, ""); }

  function replacer(name) {
    // paste.py's replacements; the patterns come from the index.
    switch (name) {
      case "markdown-link":
      case "wrapping-backticks":
        return function () { return groupsOf(arguments).text || ""; };
      case "markdown-emphasis":
        return function () { var g = groupsOf(arguments); return g.text || g.text2 || ""; };
      case "fullwidth-ascii":
        return function (m) {
          return String.fromCharCode(m.charCodeAt(0) - 0xFEE0) + (m === "\uff1a" || m === "\uff0c" ? " " : "");
        };
      case "smart-quotes":
        return function (m) { return "\u2018\u2019\u201a\u201b\u2032".indexOf(m) >= 0 ? "'" : '"'; };
      case "ellipsis":
        return function () {
          var a = arguments, m = a[0], hasGroups = typeof a[a.length - 1] === "object";
          var whole = a[a.length - (hasGroups ? 2 : 1)], offset = a[a.length - (hasGroups ? 3 : 2)];
          var core = m.replace(/^[ \t]+|[ \t]+$/g, "");
          return core.slice(-1) === "\u2026" && offset + m.length === whole.length ? "" : "...";
        };
      case "escaped-quotes":
        return function (m, q) { return q; };
      default:
        return function () { return ""; };
    }
  }

  function groupsOf(args) {
    var last = args[args.length - 1];
    return last && typeof last === "object" ? last : {};
  }

  function Engine(data) {
    var self = this;
    var norm = data.normalize, cfg = data.matcher;
    this.data = data;
    this.maxLine = norm.max_line;
    this.ansi = new RegExp(norm.ansi, "gu");
    this.tqdm = new RegExp(norm.tqdm, "u");
    this.prefixes = norm.prefixes.map(function (p) { return { name: p.name, re: new RegExp(p.pattern, "u") }; });
    this.normalizers = data.paste.normalizers.map(function (n) {
      return { name: n.name, re: new RegExp(n.pattern, "gu"), fn: replacer(n.name) };
    });
    this.softWrap = data.paste.soft_wrap;
    this.cfg = cfg;
    this.entries = data.entries;
    this.broken = 0; // signatures whose regex this browser would not compile
    this.skipped = (data.skipped || []).length; // signatures the build could not translate
    this.sigs = [];
    this.words = new Map();
    this.always = new Map();
    data.signatures.forEach(function (s) {
      var sig = { entry: data.entries[s[0]], source: s[1], anchors: s[2], specificity: s[3], role: s[4],
                  regex: null, regexI: null, stamp: 0, lowAnchors: s[2].map(function (a) { return a.toLowerCase(); }) };
      try { sig.regex = new RegExp(sig.source); } catch (e) { self.broken += 1; return; }
      self.sigs.push(sig);
      s[2].forEach(function (anchor, i) {
        var key = s[5][i];
        var bucket;
        if (key) {
          bucket = self.words.get(key);
          if (!bucket) self.words.set(key, bucket = []);
        } else {
          bucket = self.always.get(anchor);
          if (!bucket) self.always.set(anchor, bucket = []);
        }
        if (!bucket.length || bucket[bucket.length - 1] !== sig) bucket.push(sig);
      });
    });
    this._lowWords = null;
    this._stamp = 0;
    this.alwaysAny = this.always.size ? new RegExp(Array.from(this.always.keys()).map(escapeRegex).join("|")) : null;
  }

  Engine.prototype.lastSegment = function (raw) {
    var end = raw.length;
    for (;;) {
      var cr = end > 0 ? raw.lastIndexOf("\r", end - 1) : -1;
      var segment = raw.slice(cr + 1, Math.min(end, cr + 1 + this.maxLine));
      if (pyStrip(segment) || cr < 0) return pyStrip(segment) ? segment : "";
      end = cr;
    }
  };

  Engine.prototype.stripPrefixes = function (raw) { // normalize.strip_prefixes
    var text = raw.indexOf("\r") >= 0 ? this.lastSegment(raw) : raw.slice(0, this.maxLine);
    if (text.indexOf("\x1b") >= 0) text = text.replace(this.ansi, "");
    if (text.indexOf("%|") >= 0) {
      var bar = this.tqdm.exec(text);
      if (bar) text = text.slice(bar.index + bar[0].length);
    }
    text = rstripNewlines(text.split("\x00").join(""));
    var line = { text: "", rank: null, host: null, prefixes: [] };
    for (var k = 0; k < 8; k++) {
      var stripped = line.prefixes.length ? text : text.replace(/^ +/, "");
      var hit = false;
      for (var p = 0; p < this.prefixes.length; p++) {
        var m = this.prefixes[p].re.exec(stripped);
        if (!m || m.index + m[0].length === 0) continue;
        var g = m.groups || {};
        if (g.rank != null && line.rank === null && /^\d{1,9}$/.test(g.rank)) line.rank = parseInt(g.rank, 10);
        if (g.host && line.host === null) line.host = g.host;
        line.prefixes.push(this.prefixes[p].name);
        text = stripped.slice(m.index + m[0].length);
        hit = true;
        break;
      }
      if (!hit) break;
    }
    line.text = pyStrip(text.replace(PYWS_RUN, " "));
    return line;
  };

  Engine.prototype.normalizeLine = function (raw) { // paste.normalize_line
    var text = raw;
    for (var i = 0; i < this.normalizers.length; i++) {
      var n = this.normalizers[i];
      n.re.lastIndex = 0;
      text = text.replace(n.re, n.fn);
    }
    return text;
  };

  Engine.prototype.pastedLine = function (raw) { // matcher._pasted_line
    var line = this.stripPrefixes(this.normalizeLine(raw));
    var inner = this.normalizeLine(line.text);
    if (inner !== line.text) {
      var again = this.stripPrefixes(inner);
      again.rank = line.rank !== null ? line.rank : again.rank;
      again.host = line.host || again.host;
      line = again;
    }
    return line;
  };

  var ASCII = /^[\x00-\x7f]*$/;
  var AWORD = /\w+/g; // the same words as WORD on ASCII text, found faster

  function eachWord(text, fn) {
    var re = ASCII.test(text) ? AWORD : WORD, m;
    re.lastIndex = 0;
    while ((m = re.exec(text)) !== null) fn(m[0]);
  }

  function escapeRegex(s) { return s.replace(/[\\^$.*+?()[\]{}|\/-]/g, "\\$&"); }

  Engine.prototype.candidates = function (text) { // KbIndex.candidates
    var stamp = ++this._stamp, checked = [], words = this.words;
    eachWord(text, function (w) {
      var bucket = words.get(w);
      if (!bucket) return;
      for (var i = 0; i < bucket.length; i++) {
        var sig = bucket[i];
        if (sig.stamp === stamp) continue;
        sig.stamp = stamp;
        for (var k = 0; k < sig.anchors.length; k++) {
          if (text.indexOf(sig.anchors[k]) >= 0) { checked.push(sig); break; }
        }
      }
    });
    // Anchors with no word of their own: one regex says whether any is in the line, as RE2's set does.
    if (this.alwaysAny !== null && this.alwaysAny.test(text)) {
      this.always.forEach(function (sigs, anchor) {
        if (text.indexOf(anchor) < 0) return;
        for (var i = 0; i < sigs.length; i++) if (sigs[i].stamp !== stamp) { sigs[i].stamp = stamp; checked.push(sigs[i]); }
      });
    }
    return checked;
  };

  Engine.prototype.matchLine = function (text) {
    var hits = this.candidates(text), out = [];
    for (var i = 0; i < hits.length; i++) if (hits[i].regex.test(text)) out.push(hits[i]);
    return out;
  };

  Engine.prototype.matchLineIgnoringCase = function (text) { // matcher.match_line_ignoring_case
    if (this._lowWords === null) {
      var words = new Map(), always = [];
      this.words.forEach(function (sigs, word) {
        var low = word.toLowerCase(), bucket = words.get(low);
        if (!bucket) words.set(low, bucket = []);
        bucket.push.apply(bucket, sigs);
      });
      this.always.forEach(function (sigs, anchor) {
        sigs.forEach(function (sig) { always.push([anchor.toLowerCase(), sig]); });
      });
      this._lowWords = words;
      this._lowAlways = always;
    }
    var low = text.toLowerCase(), found = new Set();
    var lowWords = this._lowWords;
    eachWord(low, function (w) {
      var bucket = lowWords.get(w);
      if (bucket) for (var i = 0; i < bucket.length; i++) found.add(bucket[i]);
    });
    this._lowAlways.forEach(function (pair) { if (low.indexOf(pair[0]) >= 0) found.add(pair[1]); });
    var hits = [];
    found.forEach(function (sig) {
      if (!sig.lowAnchors.some(function (a) { return low.indexOf(a) >= 0; })) return;
      if (sig.regexI === null) {
        try { sig.regexI = new RegExp(sig.source, "i"); } catch (e) { sig.regexI = false; }
      }
      if (sig.regexI && sig.regexI.test(text)) hits.push(sig);
    });
    return hits;
  };

  Engine.prototype.softWrapJoins = function (raw, texts) { // paste.SoftWrap.joins
    var sw = this.softWrap, out = [], i = 0, n = texts.length;
    function width(lines) {
      var counts = new Map();
      for (var k = 0; k < lines.length - 1; k++) {
        var len = cpLen(rstripNewlines(lines[k]));
        counts.set(len, (counts.get(len) || 0) + 1);
      }
      var best = null;
      counts.forEach(function (c, len) { if (c >= 2 && len >= sw.min_width && (best === null || len > best)) best = len; });
      return best;
    }
    function cut(prev, w) {
      if (/[ \t]$/.test(prev) || cpLen(prev) < sw.min_width) return false;
      return w === null || cpLen(prev) === w;
    }
    while (i < n) {
      if (!texts[i]) { i += 1; continue; }
      var j = i;
      while (j < n && texts[j]) j += 1;
      if (j - i >= 2) {
        var w = width(raw.slice(i, j));
        for (var start = i; start < j; start++) {
          var spaced = texts[start], cutText = texts[start];
          for (var end = start + 1; end < Math.min(j, start + sw.max_lines); end++) {
            spaced = spaced + " " + texts[end];
            var glue = cut(rstripNewlines(raw[end - 1]), w) ? "" : " ";
            cutText = cutText + glue + texts[end];
            out.push([start, end - start + 1, spaced]);
            if (cutText !== spaced) out.push([start, end - start + 1, cutText]);
            if (out.length >= sw.max_joins) return out;
          }
        }
      }
      i = j;
    }
    return out;
  };

  Engine.prototype.match = function (text, top) { // matcher.match
    var self = this, cfg = this.cfg;
    top = top === undefined ? 5 : top;
    var rawLines = splitlines(String(text)).slice(0, cfg.max_block_lines);
    if (!rawLines.length) rawLines.push("");
    var lines = rawLines.map(function (r) { return self.stripPrefixes(r); });
    var found = new Map(), matched = new Set(), i;

    function scoreFor(spec) { return Math.min(99, 55 + Math.floor(spec / 2)); }

    function consider(sig, lineText, number, penalty, tier, casePenalty) {
      var score = scoreFor(sig.specificity) - (penalty || 0);
      if (score < cfg.min_score) return;
      tier = tier || "exact";
      if (tier !== "exact") {
        score = Math.max(1, Math.max(1, Math.min(cfg.min_score - 1, Math.floor(score / 2))) - (casePenalty || 0));
      }
      var current = found.get(sig.entry.id);
      if (current && !(score > current.score || (score === current.score && sig.specificity > current.specificity))) return;
      var e = sig.entry;
      found.set(e.id, { id: e.id, title: e.title, phase: e.phase, severity: e.severity, score: score, role: sig.role,
                        signature: sig.source, text: lineText, fix: e.fix, specificity: sig.specificity,
                        line_number: number, retry: e.retry, blame: e.blame, tier: tier });
    }

    for (i = 0; i < lines.length; i++) {
      var hits = this.matchLine(lines[i].text);
      for (var h = 0; h < hits.length; h++) { consider(hits[h], lines[i].text, i + 1); matched.add(i); }
    }
    for (i = 0; i < lines.length - 1; i++) {
      if (matched.has(i) || matched.has(i + 1) || !lines[i].text || !lines[i + 1].text) continue;
      var joined = lines[i].text + " " + lines[i + 1].text;
      this.matchLine(joined).forEach(function (sig) { consider(sig, joined, i + 1, cfg.wrap_penalty); });
    }
    if (!found.size) this._normalizedPass(rawLines, lines, consider, found);
    var ranked = Array.from(found.values());
    ranked.sort(function (a, b) {
      var ka = [a.tier !== "exact" ? 1 : 0, a.role !== "initiating" ? 1 : 0, -a.score, -a.specificity];
      var kb = [b.tier !== "exact" ? 1 : 0, b.role !== "initiating" ? 1 : 0, -b.score, -b.specificity];
      for (var k = 0; k < ka.length; k++) if (ka[k] !== kb[k]) return ka[k] - kb[k];
      return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
    });
    return ranked.slice(0, Math.max(top, 0));
  };

  Engine.prototype._normalizedPass = function (rawLines, exact, consider, found) { // matcher._normalized_pass
    var self = this, cfg = this.cfg, N = "normalized", i;
    var lines = rawLines.map(function (r) { return self.pastedLine(r); });
    var matched = new Set();
    for (i = 0; i < lines.length; i++) {
      if (lines[i].text === exact[i].text) continue;
      var hits = this.matchLine(lines[i].text);
      for (var h = 0; h < hits.length; h++) { consider(hits[h], lines[i].text, i + 1, 0, N); matched.add(i); }
    }
    for (i = 0; i < lines.length - 1; i++) {
      if (matched.has(i) || matched.has(i + 1) || !lines[i].text || !lines[i + 1].text) continue;
      if (lines[i].text === exact[i].text && lines[i + 1].text === exact[i + 1].text) continue;
      var joined = lines[i].text + " " + lines[i + 1].text;
      this.matchLine(joined).forEach(function (sig) { consider(sig, joined, i + 1, cfg.wrap_penalty, N); });
    }
    if (found.size) return;
    var windows = this.softWrapJoins(rawLines, lines.map(function (l) { return l.text; }));
    windows.forEach(function (win) {
      self.matchLine(win[2]).forEach(function (sig) { consider(sig, win[2], win[0] + 1, cfg.soft_wrap_penalty, N); });
    });
    if (found.size) return;
    for (i = 0; i < lines.length; i++) {
      if (!lines[i].text) continue;
      var text = lines[i].text;
      this.matchLineIgnoringCase(text).forEach(function (sig) { consider(sig, text, i + 1, 0, N, cfg.case_penalty); });
    }
  };

  if (typeof module !== "undefined" && module.exports) { // node, for tests
    module.exports = { Engine: Engine, splitlines: splitlines };
    return;
  }

  // --- The page --------------------------------------------------------------------------------------------

  var script = document.currentScript;
  var base = script && script.src ? script.src : document.baseURI;

  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function entryHref(id) { return ID.test(id) ? new URL("../entries/" + id + "/", base).href : null; }

  // The compiled index, fetched once per page and only when something is to be matched.
  var loading = null;
  function loadEngine() {
    if (!loading) {
      loading = fetch(new URL("dkb-match-index.json", base).href, { credentials: "same-origin" })
        .then(function (r) { if (!r.ok) throw new Error("HTTP " + r.status); return r.json(); })
        .then(function (data) { return new Engine(data); });
    }
    return loading;
  }

  // An answer's title (a link to its entry) and id, and its fix: the paste box's results and the search's.
  function titleLine(cls, r) {
    var head = el("p", cls);
    var href = entryHref(r.id);
    var title = el(href ? "a" : "span", null, r.title);
    if (href) title.href = href;
    head.appendChild(title);
    head.appendChild(document.createTextNode(" "));
    head.appendChild(el("code", "dkb-chip dkb-id", r.id));
    return head;
  }

  function fixLine(cls, r) {
    var fix = el("p", cls);
    fix.appendChild(el("strong", null, "Fix: "));
    fix.appendChild(document.createTextNode(r.fix));
    return fix;
  }

  function render(out, results, ms, lineCount) {
    out.textContent = "";
    if (!results.length) {
      out.appendChild(el("p", "dkb-paste__none", lineCount ? "No confident match. Try the search box, or `denpex-kb scan` on the whole log." : ""));
      return;
    }
    var list = el("ol", "dkb-paste__results");
    results.forEach(function (r) {
      var item = el("li", "dkb-paste__result");
      item.setAttribute("data-entry-id", r.id);
      item.appendChild(titleLine("dkb-paste__title", r));
      var chips = el("p", "dkb-paste__chips");
      chips.appendChild(el("span", "dkb-chip", "score " + r.score + (r.tier !== "exact" ? " (normalized)" : "")));
      chips.appendChild(el("span", "dkb-chip", r.role));
      if (r.retry) {
        chips.appendChild(el("span", "dkb-chip dkb-retry dkb-retry-" + String(r.retry).replace(/[^a-z]/g, ""), "retry: " + r.retry));
        chips.appendChild(el("span", "dkb-chip dkb-blame", "blame: " + r.blame));
      }
      item.appendChild(chips);
      item.appendChild(fixLine("dkb-paste__fix", r));
      var where = el("p", "dkb-paste__line");
      where.appendChild(document.createTextNode("line " + r.line_number + ": "));
      where.appendChild(el("code", null, r.text.length > 200 ? r.text.slice(0, 199) + "\u2026" : r.text));
      item.appendChild(where);
      list.appendChild(item);
    });
    out.appendChild(list);
  }

  function pasteBox(box) {
    box.textContent = "";
    var label = el("label", "dkb-paste__label", "Paste your error (one line or a whole traceback):");
    label.htmlFor = "dkb-paste-input";
    var area = el("textarea", "dkb-paste__input");
    area.id = "dkb-paste-input";
    area.rows = 6;
    area.spellcheck = false;
    area.setAttribute("autocomplete", "off");
    area.setAttribute("autocapitalize", "off");
    area.placeholder = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB ...";
    var status = el("p", "dkb-paste__status", "Loading the index\u2026");
    status.setAttribute("aria-live", "polite");
    var out = el("div", "dkb-paste__out");
    box.appendChild(label);
    box.appendChild(area);
    box.appendChild(status);
    box.appendChild(out);
    var engine = null, timer = null;

    function run() {
      timer = null;
      if (!engine) return;
      var text = area.value;
      var t0 = performance.now();
      var results = text.trim() ? engine.match(text) : [];
      var ms = performance.now() - t0;
      var count = text.trim() ? splitlines(text).length : 0;
      render(out, results, ms, count);
      box.setAttribute("data-state", "done");
      box.setAttribute("data-ms", ms.toFixed(1));
      status.textContent = count
        ? (results.length ? results.length + " match" + (results.length > 1 ? "es" : "") : "No match") +
          " in " + count + " line" + (count > 1 ? "s" : "") + ", " + ms.toFixed(0) + " ms, in this page."
        : "Matching runs in this page: nothing you paste leaves your browser.";
    }

    area.addEventListener("input", function () {
      box.setAttribute("data-state", "pending");
      if (timer !== null) clearTimeout(timer);
      timer = setTimeout(run, 120);
    });
    loadEngine()
      .then(function (loaded) {
        engine = loaded;
        window.denpexMatch = function (text, top) { return engine.match(text, top); };
        window.denpexMatchInfo = { signatures: engine.sigs.length, skipped: engine.skipped, broken: engine.broken,
                                   entries: engine.entries.length };
        box.setAttribute("data-ready", "true");
        var lost = engine.skipped + engine.broken;
        status.textContent = "Matching runs in this page: nothing you paste leaves your browser." +
          (lost ? " (" + lost + " signature" + (lost > 1 ? "s" : "") + " only the command line can match.)" : "");
        if (area.value) run();
      })
      .catch(function () {
        box.setAttribute("data-ready", "error");
        status.textContent = "The index did not load; use `denpex-kb match` on the command line.";
      });
  }

  function entriesFilter(holder) {
    var article = holder.closest("article") || document;
    var table = article.querySelector("table");
    if (!table) return;
    var heads = Array.prototype.map.call(table.querySelectorAll("thead th"), function (th) { return th.textContent.trim().toLowerCase(); });
    var rows = Array.prototype.slice.call(table.querySelectorAll("tbody tr"));
    var cell = function (row, i) { return row.cells[i] ? row.cells[i].textContent.trim() : ""; };
    holder.textContent = "";
    var text = el("input", "dkb-filter__text");
    text.type = "search";
    text.placeholder = "Filter: id, title, tag\u2026";
    text.setAttribute("aria-label", "Filter entries by text");
    holder.appendChild(text);
    var selects = [];
    ["phase", "retry", "blame"].forEach(function (name) {
      var col = heads.indexOf(name);
      if (col < 0) return;
      var select = el("select", "dkb-filter__select");
      select.name = name;
      select.setAttribute("aria-label", "Filter by " + name);
      select.appendChild(new Option(name + ": all", ""));
      var values = Array.from(new Set(rows.map(function (r) { return cell(r, col); }))).sort();
      values.forEach(function (v) { select.appendChild(new Option(v, v)); });
      holder.appendChild(select);
      selects.push({ col: col, select: select });
    });
    var count = el("span", "dkb-filter__count");
    count.setAttribute("aria-live", "polite");
    holder.appendChild(count);
    function apply() {
      var needle = text.value.trim().toLowerCase(), shown = 0;
      rows.forEach(function (row) {
        var ok = !needle || row.textContent.toLowerCase().indexOf(needle) >= 0;
        for (var k = 0; ok && k < selects.length; k++) {
          var want = selects[k].select.value;
          if (want && cell(row, selects[k].col) !== want) ok = false;
        }
        row.style.display = ok ? "" : "none";
        if (ok) shown += 1;
      });
      count.textContent = shown + " of " + rows.length + " entries";
    }
    text.addEventListener("input", apply);
    selects.forEach(function (s) { s.select.addEventListener("change", apply); });
    apply();
    holder.setAttribute("data-ready", "true");
  }

  // The site search ranks pages by words, so a pasted error line often lists its entry far down, behind pages
  // that share a few of its words. When the query is an error line the matcher knows, its answer is shown
  // above the search results, with the entry's fix: the same answer as the paste box and `denpex-kb match`.
  var SEARCH_MIN_WORDS = 3;

  function searchMatch(input) {
    var results = document.querySelector(".md-search-result");
    if (!results) return;
    var slot = el("div", "dkb-search-match");
    slot.hidden = true;
    results.insertBefore(slot, results.firstChild);
    var timer = null, asked = "";

    function show(query, found) {
      if (query !== input.value) return; // a later query is on its way
      slot.textContent = "";
      slot.hidden = !found.length;
      slot.setAttribute("data-state", "done");
      if (!found.length) return;
      var r = found[0];
      var head = titleLine("dkb-search-match__title", r);
      head.insertBefore(document.createTextNode(" "), head.firstChild);
      head.insertBefore(el("span", "dkb-chip", "matched"), head.firstChild);
      slot.setAttribute("data-entry-id", r.id);
      slot.appendChild(head);
      slot.appendChild(fixLine("dkb-search-match__fix", r));
    }

    function run() {
      timer = null;
      var query = input.value;
      if (query === asked) { slot.setAttribute("data-state", "done"); return; }
      asked = query;
      if (query.trim().split(/\s+/).length < SEARCH_MIN_WORDS) { show(query, []); return; }
      slot.setAttribute("data-state", "pending");
      loadEngine().then(function (engine) { show(query, engine.match(query, 1)); },
                        function () { slot.hidden = true; slot.setAttribute("data-state", "error"); });
    }

    input.addEventListener("input", function () {
      slot.setAttribute("data-state", "pending");
      if (timer !== null) clearTimeout(timer);
      timer = setTimeout(run, 150);
    });
  }

  function start() {
    var box = document.getElementById("dkb-paste");
    if (box) pasteBox(box);
    var search = document.querySelector(".md-search__input");
    if (search) searchMatch(search);
    var filter = document.getElementById("dkb-entries-filter");
    if (filter) entriesFilter(filter);
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
