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
  var PYWS_START = new RegExp("^[" + PYWS + "]+");
  var PYWS_END = new RegExp("[" + PYWS + "]+$");
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
      case "double-backtick-code":
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
    this.notAfter = norm.not_after || {};
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
    this.alwaysLongest = 0;
    this.always.forEach(function (sigs, anchor) { self.alwaysLongest = Math.max(self.alwaysLongest, anchor.length); });
    this._info = null; // per block: what candidates() needs of each distinct line text (see lineInfo)
    this.tierOrder = new Map((cfg.tiers || ["exact", "normalized"]).map(function (t, n) { return [t, n]; }));
    this.fuzzy = data.fuzzy ? new Fuzzy(this, data.fuzzy) : null;
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
        var blocked = this.notAfter[this.prefixes[p].name];
        if (blocked && line.prefixes.length && blocked.indexOf(line.prefixes[line.prefixes.length - 1]) >= 0) break;
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
    return this.pastedFrom(this.stripPrefixes(this.normalizeLine(raw)));
  };

  // The rest of pastedLine, from its first step's line (a fresh object: it may be returned as it is).
  Engine.prototype.pastedFrom = function (line) {
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
    var words = [];
    eachWord(text, function (w) { words.push(w); });
    return this.candidatesOf(text, words, this.alwaysAny !== null && this.alwaysAny.test(text));
  };

  // candidates(text), given text's words in order and whether an anchor with no word of its own is in it.
  Engine.prototype.candidatesOf = function (text, textWords, anyAlways) {
    var stamp = ++this._stamp, checked = [], words = this.words;
    for (var n = 0; n < textWords.length; n++) {
      var bucket = words.get(textWords[n]);
      if (!bucket) continue;
      for (var i = 0; i < bucket.length; i++) {
        var sig = bucket[i];
        if (sig.stamp === stamp) continue;
        sig.stamp = stamp;
        for (var k = 0; k < sig.anchors.length; k++) {
          if (text.indexOf(sig.anchors[k]) >= 0) { checked.push(sig); break; }
        }
      }
    }
    // Anchors with no word of their own: one regex says whether any is in the line, as RE2's set does.
    if (anyAlways) {
      this.always.forEach(function (sigs, anchor) {
        if (text.indexOf(anchor) < 0) return;
        for (var i = 0; i < sigs.length; i++) if (sigs[i].stamp !== stamp) { sigs[i].stamp = stamp; checked.push(sigs[i]); }
      });
    }
    return checked;
  };

  Engine.prototype.matchLine = function (text) {
    return this.testAll(text, this._info === null ? this.candidates(text) : this.lineCandidates(text));
  };

  Engine.prototype.testAll = function (text, hits) {
    var out = [];
    for (var i = 0; i < hits.length; i++) if (hits[i].regex.test(text)) out.push(hits[i]);
    return out;
  };

  // A block's passes match each line, each pair of lines and each soft-wrap window of lines: the words of each
  // distinct line text are found once, and those of a join are put together from its lines' (a join with no
  // space between two word characters makes one word of the two ends). Whether a join holds an anchor with no
  // word of its own is asked of its lines (cached) and of the few characters around each seam.
  var STARTS_WORD = /^[\p{L}\p{N}_]/u, ENDS_WORD = /[\p{L}\p{N}_]$/u;

  Engine.prototype.lineInfo = function (text) {
    var info = this._info.get(text);
    if (info === undefined) {
      var words = [];
      eachWord(text, function (w) { words.push(w); });
      info = { words: words, starts: STARTS_WORD.test(text), ends: ENDS_WORD.test(text),
               always: this.alwaysAny !== null && this.alwaysAny.test(text) };
      this._info.set(text, info);
    }
    return info;
  };

  Engine.prototype.lineCandidates = function (text) {
    var info = this.lineInfo(text);
    return this.candidatesOf(text, info.words, info.always);
  };

  // Candidates of parts[0] + glues[0] + parts[1] + ... (= joined); each glue is "" or " ".
  Engine.prototype.joinedCandidates = function (parts, glues, joined) {
    var words = [], pending = null, endsWord = false, anyAlways = false, at = 0, reach = this.alwaysLongest;
    for (var k = 0; k < parts.length; k++) {
      var info = this.lineInfo(parts[k]), ws = info.words, glue = k ? glues[k - 1] : "";
      if (k && this.alwaysAny !== null && !anyAlways) {
        anyAlways = this.alwaysAny.test(joined.slice(Math.max(0, at - reach + 1), at + glue.length + reach - 1));
      }
      if (info.always) anyAlways = true;
      var merge = glue === "" && endsWord && info.starts;
      for (var j = 0; j < ws.length; j++) {
        if (j === 0 && merge) { pending += ws[0]; continue; }
        if (pending !== null) words.push(pending);
        pending = ws[j];
      }
      endsWord = info.ends;
      if (!endsWord && pending !== null) { words.push(pending); pending = null; }
      at += glue.length + parts[k].length;
    }
    if (pending !== null) words.push(pending);
    return this.candidatesOf(joined, words, anyAlways);
  };

  Engine.prototype.matchJoined = function (parts, glues, joined) {
    return this.testAll(joined, this._info === null ? this.candidates(joined) : this.joinedCandidates(parts, glues, joined));
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
      // Whether any of them is in a line at all, asked once rather than anchor by anchor.
      this._lowAlwaysAny = always.length ? new RegExp(always.map(function (pair) { return escapeRegex(pair[0]); }).join("|")) : null;
    }
    var low = text.toLowerCase(), found = new Set();
    var lowWords = this._lowWords;
    eachWord(low, function (w) {
      var bucket = lowWords.get(w);
      if (bucket) for (var i = 0; i < bucket.length; i++) found.add(bucket[i]);
    });
    if (this._lowAlwaysAny !== null && this._lowAlwaysAny.test(low)) {
      this._lowAlways.forEach(function (pair) { if (low.indexOf(pair[0]) >= 0) found.add(pair[1]); });
    }
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

  Engine.prototype.wrapWidth = function (lines) { // paste.SoftWrap.width
    var minWidth = this.softWrap.min_width, counts = new Map();
    for (var k = 0; k < lines.length - 1; k++) {
      var len = cpLen(rstripNewlines(lines[k]));
      counts.set(len, (counts.get(len) || 0) + 1);
    }
    var best = null;
    counts.forEach(function (c, len) { if (c >= 2 && len >= minWidth && (best === null || len > best)) best = len; });
    return best;
  };

  Engine.prototype.terminalLines = function (raw, prefixed) { // paste.SoftWrap.terminal
    var w = this.wrapWidth(raw), out = [], i = 0, n = raw.length;
    if (w === null || Math.max.apply(null, raw.map(cpLen)) !== w) return out;
    while (i < n - 1) {
      var j = i;
      while (j < n - 1 && cpLen(raw[j]) === w && raw[j + 1].trim() && !prefixed[j + 1]) j += 1;
      if (j > i) out.push([i, j - i + 1, raw.slice(i, j + 1).join("")]);
      i = j + 1;
    }
    return out;
  };

  Engine.prototype.cutPairs = function (raw, prefixed) { // paste.SoftWrap.cut_pairs
    var out = [], min = this.softWrap.terminal_min;
    for (var i = 0; i < raw.length - 1; i++) {
      var head = rstripNewlines(raw[i]), tail = rstripNewlines(raw[i + 1]);
      if (cpLen(head) >= min && !PYWS_END.test(head) && tail && !PYWS_START.test(tail)
          && cpLen(tail) <= cpLen(head) && !prefixed[i + 1]) out.push([i, head + tail]);
    }
    return out;
  };

  Engine.prototype.softWrapJoins = function (raw, texts) { // paste.SoftWrap.joins
    var self = this, sw = this.softWrap, out = [], i = 0, n = texts.length;
    function cut(prev, w) {
      if (/[ \t]$/.test(prev) || cpLen(prev) < sw.min_width) return false;
      return w === null || cpLen(prev) === w;
    }
    while (i < n) {
      if (!texts[i]) { i += 1; continue; }
      var j = i;
      while (j < n && texts[j]) j += 1;
      if (j - i >= 2) {
        var w = self.wrapWidth(raw.slice(i, j));
        for (var start = i; start < j; start++) {
          var spaced = texts[start], cutText = texts[start], spaces = [], glues = [];
          for (var end = start + 1; end < Math.min(j, start + sw.max_lines); end++) {
            spaced = spaced + " " + texts[end];
            var glue = cut(rstripNewlines(raw[end - 1]), w) ? "" : " ";
            cutText = cutText + glue + texts[end];
            spaces.push(" ");
            glues.push(glue);
            // [first line, lines, text, the glue between each two lines]
            out.push([start, end - start + 1, spaced, spaces.slice()]);
            if (cutText !== spaced) out.push([start, end - start + 1, cutText, glues.slice()]);
            if (out.length >= sw.max_joins) return out;
          }
        }
      }
      i = j;
    }
    return out;
  };

  var SPACE = [" "];

  Engine.prototype.match = function (text, top) { // matcher.match
    this._info = new Map();
    try {
      return this._match(text, top);
    } finally {
      this._info = null;
    }
  };

  Engine.prototype._match = function (text, top) {
    var self = this, cfg = this.cfg;
    top = top === undefined ? 5 : top;
    var rawLines = splitlines(String(text)).slice(0, cfg.max_block_lines);
    if (!rawLines.length) rawLines.push("");
    // A line repeated in the block (every rank prints it) is read once; each pass below memoizes the same way.
    var stripped = new Map();
    var lines = rawLines.map(function (r) {
      var line = stripped.get(r);
      if (line === undefined) stripped.set(r, line = self.stripPrefixes(r));
      return line;
    });
    var found = new Map(), i;

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

    function reread(printed, number) { // a wrapped line rebuilt from its pasted pieces (matcher.match)
      var rebuilt = self.stripPrefixes(printed);
      self.matchLine(rebuilt.text).forEach(function (sig) { consider(sig, rebuilt.text, number, cfg.wrap_penalty); });
    }

    for (i = 0; i < lines.length; i++) {
      var hits = this.matchLine(lines[i].text);
      for (var h = 0; h < hits.length; h++) consider(hits[h], lines[i].text, i + 1);
    }
    for (i = 0; i < lines.length - 1; i++) { // each line with the next, matched ones too (matcher.match)
      if (!lines[i].text || !lines[i + 1].text) continue;
      var joined = lines[i].text + " " + lines[i + 1].text;
      this.matchJoined([lines[i].text, lines[i + 1].text], SPACE, joined)
        .forEach(function (sig) { consider(sig, joined, i + 1, cfg.wrap_penalty); });
      if (lines[i + 1].prefixes.length && lines[i + 1].prefixes.join("\n") !== lines[i].prefixes.join("\n")) {
        // The continuation opens with a log prefix its line does not share: a wrap before a time stamp.
        reread(rawLines[i].replace(PYWS_END, "") + " " + rawLines[i + 1].replace(PYWS_START, ""), i + 1);
      }
    }
    // Long lines a terminal wrapped at its width, rebuilt (matcher.match).
    var prefixed = lines.map(function (l) { return l.prefixes.length > 0; });
    if (lines.length > 2) {
      this.terminalLines(rawLines, prefixed).forEach(function (t) { reread(t[2], t[0] + 1); });
    }
    // A line a terminal wrapped once, inside a word: its two pieces concatenated (matcher.match).
    this.cutPairs(rawLines, prefixed).forEach(function (t) { reread(t[1], t[0] + 1); });
    var pres = [];
    if (!found.size) this._normalizedPass(rawLines, lines, consider, found, pres);
    if (!found.size && this.fuzzy) {
      // Only when no signature matched: a line close to a known wording, then a bare exception class. Their
      // scores (fuzzy 1-24, evidence 1-10) stay below every signature hit's, and their tiers rank after.
      this.fuzzy.pass(rawLines, function (e, lineText, number, tier, score, signature, role) {
        var current = found.get(e.id);
        if (current && !(score > current.score || (score === current.score && 0 > current.specificity))) return;
        found.set(e.id, { id: e.id, title: e.title, phase: e.phase, severity: e.severity, score: score, role: role,
                          signature: signature, text: lineText, fix: e.fix, specificity: 0, line_number: number,
                          retry: e.retry, blame: e.blame, tier: tier });
      }, lines.map(function (l) { return l.text; }), pres);
    }
    var order = this.tierOrder;
    var ranked = Array.from(found.values());
    ranked.sort(function (a, b) {
      var ka = [order.get(a.tier), a.role !== "initiating" ? 1 : 0, -a.score, -a.specificity];
      var kb = [order.get(b.tier), b.role !== "initiating" ? 1 : 0, -b.score, -b.specificity];
      for (var k = 0; k < ka.length; k++) if (ka[k] !== kb[k]) return ka[k] - kb[k];
      return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
    });
    return ranked.slice(0, Math.max(top, 0));
  };

  // pres[i] is set to the text of pastedLine's first step for rawLines[i], which the fuzzy tier reads too.
  Engine.prototype._normalizedPass = function (rawLines, exact, consider, found, pres) { // matcher._normalized_pass
    var self = this, cfg = this.cfg, N = "normalized", i, memo = new Map();
    var lines = rawLines.map(function (r, k) {
      var done = memo.get(r);
      if (done === undefined) {
        var normal = self.normalizeLine(r);
        // Nothing to undo: the first step's line is the exact pass's (stripPrefixes is a function of the text).
        var first = normal === r ? { text: exact[k].text, rank: exact[k].rank, host: exact[k].host,
                                     prefixes: exact[k].prefixes.slice() } : self.stripPrefixes(normal);
        var firstText = first.text;
        memo.set(r, done = [self.pastedFrom(first), firstText]);
      }
      pres[k] = done[1];
      return done[0];
    });
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
      this.matchJoined([lines[i].text, lines[i + 1].text], SPACE, joined)
        .forEach(function (sig) { consider(sig, joined, i + 1, cfg.wrap_penalty, N); });
    }
    if (found.size) return;
    var texts = lines.map(function (l) { return l.text; });
    var windows = this.softWrapJoins(rawLines, texts);
    windows.forEach(function (win) {
      self.matchJoined(texts.slice(win[0], win[0] + win[1]), win[3], win[2])
        .forEach(function (sig) { consider(sig, win[2], win[0] + 1, cfg.soft_wrap_penalty, N); });
    });
    if (found.size) return;
    var ignoring = new Map(); // a repeated line is read once
    for (i = 0; i < lines.length; i++) {
      if (!lines[i].text) continue;
      var text = lines[i].text, caseHits = ignoring.get(text);
      if (caseHits === undefined) ignoring.set(text, caseHits = this.matchLineIgnoringCase(text));
      caseHits.forEach(function (sig) { consider(sig, text, i + 1, 0, N, cfg.case_penalty); });
    }
  };


  // --- The fuzzy and exception-evidence tiers: denpex_kb/fuzzy.py and matcher._fuzzy_pass ----------------------
  //
  // Strings are compared as Python compares them, by code point (not by UTF-16 unit). The scorer is rapidfuzz's
  // partial_ratio_alignment (rapidfuzz-cpp fuzz_impl.hpp): the same windows, visited in the same order, so that
  // the same alignment wins a tie. Its similarity is the Indel normalized similarity, 1 - (n1 + n2 - 2 LCS) /
  // (n1 + n2), with the LCS counted by Hyyro's bit-parallel algorithm over 32-bit words.

  function codePoints(s) {
    var out = [];
    for (var i = 0; i < s.length; i++) {
      var c = s.charCodeAt(i);
      if (c >= 0xd800 && c < 0xdc00 && i + 1 < s.length) {
        var d = s.charCodeAt(i + 1);
        if (d >= 0xdc00 && d < 0xe000) { out.push(((c - 0xd800) << 10) + (d - 0xdc00) + 0x10000); i++; continue; }
      }
      out.push(c);
    }
    return out;
  }

  function fromCodePoints(cps, start, end) {
    var out = "";
    for (var i = start; i < end; i += 4096) out += String.fromCodePoint.apply(null, cps.slice(i, Math.min(end, i + 4096)));
    return out;
  }

  function Pattern(s1) { // the bit masks of each code point of s1 (rapidfuzz's PatternMatchVector)
    var words = Math.ceil(s1.length / 32) || 1;
    var map = new Map();
    for (var i = 0; i < s1.length; i++) {
      var m = map.get(s1[i]);
      if (!m) map.set(s1[i], m = new Int32Array(words));
      m[i >> 5] |= 1 << (i & 31);
    }
    this.len = s1.length;
    this.words = words;
    this.map = map;
    this.S = new Int32Array(words);
  }

  Pattern.prototype.lcs = function (s2, start, end) {
    var S = this.S, words = this.words, map = this.map, w;
    for (w = 0; w < words; w++) S[w] = -1;
    for (var i = start; i < end; i++) {
      var M = map.get(s2[i]);
      if (!M) continue;
      var carry = 0;
      for (w = 0; w < words; w++) {
        var s = S[w], u = s & M[w];
        var x = (s >>> 0) + (u >>> 0) + carry;
        carry = x > 0xffffffff ? 1 : 0;
        S[w] = (x >>> 0) | (s & ~u);
      }
    }
    var count = 0;
    for (w = 0; w < words; w++) {
      var zeros = ~S[w];
      var bits = Math.min(32, this.len - 32 * w);
      if (bits < 32) zeros &= (1 << bits) - 1;
      zeros = zeros - ((zeros >>> 1) & 0x55555555);
      zeros = (zeros & 0x33333333) + ((zeros >>> 2) & 0x33333333);
      count += (((zeros + (zeros >>> 4)) & 0x0f0f0f0f) * 0x01010101) >>> 24;
    }
    return count;
  };

  Pattern.prototype.distance = function (s2, start, end) { // Indel distance of s1 and s2[start:end]
    return this.len + (end - start) - 2 * this.lcs(s2, start, end);
  };

  // rapidfuzz's CachedIndel.normalized_similarity(s2, cutoff) * 100, with its cutoff arithmetic.
  function similarity(dist, maximum, cutoffPct) {
    var cutoff = cutoffPct / 100;
    var normCutoff = Math.min(1.0, 1.0 - cutoff + 0.00001);
    var cutoffDist = Math.ceil(maximum * normCutoff);
    var d = dist <= cutoffDist ? dist : cutoffDist + 1;
    var normDist = maximum ? d / maximum : 0.0;
    if (!(normDist <= normCutoff)) normDist = 1.0;
    var normSim = 1.0 - normDist;
    return (normSim >= cutoff ? normSim : 0.0) * 100;
  }

  function partialRatioImpl(s1, s2, scoreCutoff) { // fuzz_detail::partial_ratio_impl, len(s1) <= len(s2)
    var len1 = s1.length, len2 = s2.length, pm = new Pattern(s1);
    var res = { score: 0, src_start: 0, src_end: len1, dest_start: 0, dest_end: len1 };
    if (len2 > len1) {
      var maximum = len1 * 2;
      var cutoffDist = Math.ceil(maximum * Math.min(1.0, 1.0 - scoreCutoff / 100 + 0.00001));
      var best = Infinity, NONE = -1;
      var scores = new Array(len2 - len1).fill(NONE);
      var windows = [[0, len2 - len1 - 1]], next = [];
      var visit = function (at) { // scores the window at `at` once; true when it is an exact match
        if (scores[at] !== NONE) return false;
        scores[at] = pm.distance(s2, at, at + len1);
        if (scores[at] >= cutoffDist) return false;
        cutoffDist = best = scores[at];
        res.dest_start = at; res.dest_end = at + len1;
        return best === 0;
      };
      while (windows.length) {
        for (var k = 0; k < windows.length; k++) {
          var a = windows[k][0], b = windows[k][1];
          if (visit(a) || visit(b)) { res.score = 100; return res; }
          var cellDiff = b - a;
          if (cellDiff === 1) continue;
          var knownEdits = Math.abs(scores[a] - scores[b]);
          var improvement = Math.floor((cellDiff - Math.floor(knownEdits / 2)) / 2) * 2;
          if (Math.min(scores[a], scores[b]) - improvement < cutoffDist) {
            var center = Math.floor(cellDiff / 2);
            next.push([a, a + center], [a + center, b]);
          }
        }
        windows = next;
        next = [];
      }
      var score = (1.0 - best / maximum) * 100;
      if (score >= scoreCutoff) scoreCutoff = res.score = score;
    }
    var i, ls;
    for (i = 1; i < len1; i++) {
      if (!pm.map.has(s2[i - 1])) continue;
      ls = similarity(pm.distance(s2, 0, i), len1 + i, scoreCutoff);
      if (ls > res.score) {
        scoreCutoff = res.score = ls;
        res.dest_start = 0; res.dest_end = i;
        if (res.score === 100) return res;
      }
    }
    for (i = len2 - len1; i < len2; i++) {
      if (!pm.map.has(s2[i])) continue;
      ls = similarity(pm.distance(s2, i, len2), len1 + len2 - i, scoreCutoff);
      if (ls > res.score) {
        scoreCutoff = res.score = ls;
        res.dest_start = i; res.dest_end = len2;
        if (res.score === 100) return res;
      }
    }
    return res;
  }

  function swapped(r) {
    return { score: r.score, src_start: r.dest_start, src_end: r.dest_end, dest_start: r.src_start, dest_end: r.src_end };
  }

  // rapidfuzz.fuzz.partial_ratio_alignment(s1, s2) on arrays of code points.
  function partialRatioAlignment(s1, s2) {
    var len1 = s1.length, len2 = s2.length;
    if (len1 > len2) return swapped(partialRatioAlignment(s2, s1));
    if (!len1 || !len2) return { score: len1 === len2 ? 100 : 0, src_start: 0, src_end: len1, dest_start: 0, dest_end: len1 };
    var res = partialRatioImpl(s1, s2, 0);
    if (res.score !== 100 && len1 === len2) {
      var res2 = partialRatioImpl(s2, s1, Math.max(0, res.score));
      if (res2.score > res.score) return swapped(res2);
    }
    return res;
  }

  function pyRound(x) { // Python's round(): halves to even
    var f = Math.floor(x), diff = x - f;
    if (diff > 0.5) return f + 1;
    if (diff < 0.5) return f;
    return f % 2 === 0 ? f : f + 1;
  }

  function Fuzzy(engine, data) {
    var self = this;
    this.engine = engine;
    this.data = data;
    this.maskRe = new RegExp(data.masks, "gu");
    this.wordsRe = new RegExp(data.words, "gu");
    this.frameRe = new RegExp(data.frame, "u");
    this.leadRe = new RegExp(data.lead, "u");
    this.infoRe = new RegExp(data.info, "iu");
    this.exceptionRe = new RegExp(data.exception, "u");
    this.kept = new Set(data.kept);
    this.functionWords = new Set(data.function_words);
    this.known = data.known.map(function (row) {
      var lead = self.leadRe.exec(row[2]); // fuzzy._lead, in code points as Python counts
      return { entry: row[0], role: data.roles[row[1]], text: row[2], cps: null, lead: lead ? codePoints(lead[0]).length : 0 };
    });
    this.evidence = new Map(Object.keys(data.evidence).map(function (k) { return [k, data.evidence[k]]; }));
    var postings = new Map();
    this.words = this.known.map(function (known, k) {
      var words = self.contentWords(known.text);
      new Set(words).forEach(function (w) {
        var ids = postings.get(w);
        if (!ids) postings.set(w, ids = []);
        ids.push(k);
      });
      return words;
    });
    this.postings = postings;
    this.idf = new Map();
    postings.forEach(function (ids, w) { self.idf.set(w, data.idf_by_count[String(ids.length)]); });
  }

  Fuzzy.prototype.contentWords = function (sk) {
    var out = [], re = this.wordsRe, m;
    re.lastIndex = 0;
    while ((m = re.exec(sk)) !== null) if (!this.functionWords.has(m[0])) out.push(m[0]);
    return out;
  };

  Fuzzy.prototype.mask = function (text) { // fuzzy._mask
    var kept = this.kept;
    this.maskRe.lastIndex = 0;
    return text.replace(this.maskRe, function () {
      var m = arguments[0], groups = arguments[arguments.length - 1];
      if (kept.has(m.toLowerCase())) return m;
      for (var name in groups) if (groups[name] !== undefined) return "{" + name + "}";
      return "{num}";
    });
  };

  // `pre` is engine.stripPrefixes(engine.normalizeLine(raw)).text, `text` engine.stripPrefixes(raw).text: the
  // block's passes have both for every line already, and hand them in.
  Fuzzy.prototype.skeleton = function (raw, pre) { // fuzzy.skeleton
    var stripped = pre === undefined ? this.engine.stripPrefixes(this.engine.normalizeLine(raw)).text : pre;
    return pyStrip(this.mask(stripped).replace(PYWS_RUN, " ")).toLowerCase();
  };

  var SURROGATE = /[\ud800-\udfff]/;

  Fuzzy.prototype.informational = function (raw, text) { // fuzzy.informational
    if (text === undefined) text = this.engine.stripPrefixes(raw).text;
    var reach = this.data.level_reach;
    if (SURROGATE.test(text)) {
      var cps = codePoints(text);
      text = fromCodePoints(cps, 0, Math.min(cps.length, reach));
    } else {
      text = text.slice(0, reach); // one code unit per code point
    }
    return this.infoRe.test(text);
  };

  Fuzzy.prototype.comparable = function (sk) {
    return this.contentWords(sk).length >= this.data.min_words && !this.frameRe.test(sk);
  };

  Fuzzy.prototype.candidates = function (words) { // FuzzyIndex._candidates
    var self = this, common = this.data.common;
    var rare = words.filter(function (w) { return self.idf.has(w) && self.postings.get(w).length <= common; });
    rare.sort(function (a, b) { return self.idf.get(b) - self.idf.get(a); });
    rare = rare.slice(0, this.data.query_words);
    var overlap = new Map();
    rare.forEach(function (w) {
      var weight = self.idf.get(w);
      self.postings.get(w).forEach(function (k) { overlap.set(k, (overlap.get(k) || 0) + weight); });
    });
    var ks = Array.from(overlap.keys());
    ks.sort(function (a, b) { return overlap.get(b) - overlap.get(a) || a - b; });
    return ks.slice(0, this.data.candidates);
  };

  Fuzzy.prototype.covered = function (words, by) { // FuzzyIndex._covered
    var weights = new Map(), self = this;
    words.forEach(function (w) { if (!weights.has(w)) weights.set(w, self.idf.has(w) ? self.idf.get(w) : self.data.unseen); });
    var total = 0, have = 0;
    weights.forEach(function (v) { total += v; });
    weights.forEach(function (v, w) { if (by.has(w)) have += v; });
    return total ? 100.0 * have / total : 0.0;
  };

  function classes(words) {
    var out = new Set();
    words.forEach(function (w) { if ((/error$|exception$/).test(w) && w.length > 5) out.add(w); });
    return out;
  }

  Fuzzy.prototype.score = function (k, sk, skCps) { // FuzzyIndex.score
    var known = this.known[k];
    if (known.cps === null) known.cps = codePoints(known.text);
    var knownIsShorter = known.cps.length <= skCps.length;
    var shorter = knownIsShorter ? known.cps : skCps, longer = knownIsShorter ? skCps : known.cps;
    var aligned = partialRatioAlignment(shorter, longer);
    if (!knownIsShorter && aligned.dest_start > known.lead + this.data.cut_off_start * (known.cps.length - known.lead)) return 0.0;
    var window = fromCodePoints(longer, aligned.dest_start, aligned.dest_end);
    var shortWords = knownIsShorter ? this.words[k] : this.contentWords(sk);
    var windowWords = this.contentWords(window);
    var kept = this.kept;
    var keptShort = new Set(shortWords.filter(function (w) { return kept.has(w); }));
    var keptWindow = new Set(windowWords.filter(function (w) { return kept.has(w); }));
    if (keptShort.size !== keptWindow.size || Array.from(keptShort).some(function (w) { return !keptWindow.has(w); })) return 0.0;
    var shortClasses = classes(shortWords), windowClasses = classes(windowWords);
    if (shortClasses.size && windowClasses.size && !Array.from(shortClasses).some(function (w) { return windowClasses.has(w); })) return 0.0;
    return Math.min(aligned.score, this.covered(shortWords, new Set(windowWords)), this.covered(windowWords, new Set(shortWords)));
  };

  // An upper bound of score(k, sk), without aligning: every word the aligned window holds is a substring of the
  // longer text, so the share of the shorter text's words found in the longer one bounds the first coverage.
  // (Floating-point sums of fewer positive terms, in the same order, are never larger.)
  Fuzzy.prototype.bound = function (k, sk, skCps, skWords) {
    var known = this.known[k];
    if (known.cps === null) known.cps = codePoints(known.text);
    var knownIsShorter = known.cps.length <= skCps.length;
    var shortWords = knownIsShorter ? this.words[k] : skWords, longer = knownIsShorter ? sk : known.text;
    return this.covered(shortWords, new Set(shortWords.filter(function (w) { return longer.indexOf(w) >= 0; })));
  };

  Fuzzy.prototype.answer = function (sk) { // FuzzyIndex.answer
    var self = this, skCps = codePoints(sk), seen = new Set(), skWords = this.contentWords(sk);
    var words = skWords.filter(function (w) { return seen.has(w) ? false : seen.add(w); });
    // A candidate that cannot reach threshold - margin can be neither the answer nor a runner-up that denies it:
    // it is left unscored, which changes no answer and spares most of the alignments.
    var floor = this.data.threshold - this.data.margin, ranked = [];
    this.candidates(words).forEach(function (k) {
      if (self.bound(k, sk, skCps, skWords) >= floor) ranked.push([k, self.score(k, sk, skCps)]);
    });
    ranked.sort(function (a, b) { return b[1] - a[1] || a[0] - b[0]; });
    if (!ranked.length || ranked[0][1] < this.data.threshold) return null;
    var entry = this.known[ranked[0][0]].entry, runnerUp = 0.0;
    for (var i = 1; i < ranked.length; i++) if (this.known[ranked[i][0]].entry !== entry) { runnerUp = ranked[i][1]; break; }
    return ranked[0][1] - runnerUp >= this.data.margin ? ranked[0] : null;
  };

  // `memo` (optional) keeps each distinct skeleton's answer: logs repeat a line with other numbers in it (every
  // step, every rank), and its masked skeleton is the same, so it is scored once.
  Fuzzy.prototype.answerRaw = function (raw, text, pre, memo) { // FuzzyIndex.answer_raw
    if (this.informational(raw, text)) return null;
    var sk = this.skeleton(raw, pre);
    if (memo && memo.has(sk)) return memo.get(sk);
    var hit = this.comparable(sk) ? this.answer(sk) : null;
    if (memo) memo.set(sk, hit);
    return hit;
  };

  Fuzzy.prototype.exceptionType = function (text) { // normalize.exception_type
    var m = this.exceptionRe.exec(text);
    return m ? m.groups.type : null;
  };

  Fuzzy.prototype.evidenceFor = function (raw, pre) { // FuzzyIndex.evidence_for
    if (pre === undefined) pre = this.engine.stripPrefixes(this.engine.normalizeLine(raw)).text;
    var text = pre.replace(/[ .:]+$/, "");
    var exc = this.exceptionType(text);
    if (exc === null || text !== exc) return null;
    return this.evidence.get(exc) || null;
  };

  Fuzzy.prototype.fuzzyScore = function (similarity) { // matcher._fuzzy_score
    var t = this.data.threshold, top = this.data.fuzzy_top, span = Math.max(100.0 - t, 1.0);
    return Math.max(1, Math.min(top, pyRound(1 + (top - 1) * (similarity - t) / span)));
  };

  // texts[i] and pres[i] (optional): rawLines[i]'s text as the exact and the normalized passes read it.
  Fuzzy.prototype.pass = function (rawLines, offer, texts, pres) { // matcher._fuzzy_pass
    var self = this, engine = this.engine, found = 0, memo = new Map(), bySkeleton = new Map();
    texts = texts || rawLines.map(function (raw) { return engine.stripPrefixes(raw).text; });
    pres = pres || [];
    rawLines.forEach(function (raw, i) {
      // the same line gets the same answer: a repeated line is scored once
      var hit = memo.has(raw) ? memo.get(raw) : self.answerRaw(raw, texts[i], pres[i], bySkeleton);
      memo.set(raw, hit);
      if (hit === null) return;
      var known = self.known[hit[0]];
      offer(engine.entries[known.entry], texts[i], i + 1, "fuzzy", self.fuzzyScore(hit[1]), known.text, known.role);
      found += 1;
    });
    if (found) return;
    var seen = new Map();
    rawLines.forEach(function (raw, i) {
      var entries = seen.has(raw) ? seen.get(raw) : self.evidenceFor(raw, pres[i]);
      seen.set(raw, entries);
      if (entries === null) return;
      var text = texts[i];
      entries.forEach(function (k, rank) {
        offer(engine.entries[k], text, i + 1, "evidence", self.data.evidence_score - rank, self.exceptionType(text) || "",
              "initiating");
      });
    });
  };

  if (typeof module !== "undefined" && module.exports) { // node, for tests
    module.exports = { Engine: Engine, splitlines: splitlines, partialRatioAlignment: partialRatioAlignment,
                       codePoints: codePoints };
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

  // What `denpex-kb match` adds after the score for an answer that is not an exact signature hit.
  var TIER_NOTE = { normalized: ", after undoing pasted-text artifacts", fuzzy: ", fuzzy", evidence: ", evidence only" };

  function cut(text) { return text.length > 300 ? text.slice(0, 299) + "\u2026" : text; }

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
      chips.appendChild(el("span", "dkb-chip dkb-tier-" + r.tier, "score " + r.score + (TIER_NOTE[r.tier] || "")));
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
      if (r.tier === "fuzzy") { // as `denpex-kb match` says it: no signature matched, a known wording is this close
        var close = el("p", "dkb-paste__close");
        close.appendChild(document.createTextNode("close to: "));
        close.appendChild(el("code", null, cut(r.signature)));
        close.appendChild(document.createTextNode(" (no signature matched; a known wording is this close)"));
        item.appendChild(close);
      } else if (r.tier === "evidence") {
        var alone = el("p", "dkb-paste__close");
        alone.appendChild(document.createTextNode("evidence: "));
        alone.appendChild(el("code", null, r.signature));
        alone.appendChild(document.createTextNode(" alone, which this failure raises (the message was cut off?)"));
        item.appendChild(alone);
      }
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
        // The fuzzy tier's scorer, for the tests that hold it equal to rapidfuzz's.
        window.denpexPartialRatio = function (a, b) { return partialRatioAlignment(codePoints(a), codePoints(b)); };
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
      head.insertBefore(el("span", "dkb-chip dkb-tier-" + r.tier,
                           r.tier === "fuzzy" ? "close to a known wording" : r.tier === "evidence" ? "exception class only" : "matched"),
                        head.firstChild);
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
