#!/usr/bin/env bash
# Checks the documentation, offline, with python3's standard library only:
#
# 1. Every relative link and `#anchor` in README.md, BENCHMARKS.md,
#    docs/**/*.md and crates/*/README.md resolves: the file or directory
#    exists, and an anchor names a heading of the target file (GitHub's
#    slugs: lowercase, punctuation other than - and _ removed, spaces to -,
#    a repeated heading gets -1, -2, ...). http(s) and mailto links, and
#    links inside code blocks or inline code, are not checked.
# 2. docs/cli.md quotes `mpit-tuner ... --help` where a line
#    `<!-- help: mpit-tuner SUBCOMMAND -->` stands right before a fenced
#    block; each such block must be what the binary prints today.
#    The binary is $MPIT_TUNER_BIN (default target/mpich/debug/mpit-tuner).
#
#   bash scripts/check-docs.sh                # both checks; exit 1 on a problem
#   bash scripts/check-docs.sh --links-only   # the links only (no binary needed)
#   bash scripts/check-docs.sh --update-help  # rewrite docs/cli.md's help blocks from the binary
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  "" | --links-only | --update-help) ;;
  *)
    sed -n '2,17p' "$0" >&2
    exit 2
    ;;
esac
exec python3 - "${1:-}" <<'PY'
import difflib
import glob
import os
import re
import subprocess
import sys
import urllib.parse

MODE = sys.argv[1]
BIN = os.environ.get("MPIT_TUNER_BIN", "target/mpich/debug/mpit-tuner")
CLI_PAGE = "docs/cli.md"
FENCE = re.compile(r"^\s*(`{3,}|~{3,})(.*)$")


def markdown_files():
    files = ["README.md", "BENCHMARKS.md"]
    files += sorted(glob.glob("docs/**/*.md", recursive=True))
    files += sorted(glob.glob("crates/*/README.md"))
    return [f for f in files if os.path.isfile(f)]


def blank_code(lines):
    """The lines with fenced code blocks blanked (line numbers kept)."""
    out, fence = [], None
    for line in lines:
        m = FENCE.match(line)
        if fence is None:
            if m and not (m.group(1)[0] == "`" and "`" in m.group(2)):
                fence = m.group(1)
                out.append("")
                continue
            out.append(line)
        else:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) \
                    and not m.group(2).strip():
                fence = None
            out.append("")
    return out


CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.S)
COMMENT = re.compile(r"<!--.*?-->", re.S)


def strip_inline(text):
    """Inline code and HTML comments replaced by spaces (newlines kept)."""
    keep = lambda m: re.sub(r"[^\n]", " ", m.group(0))
    return CODE_SPAN.sub(keep, COMMENT.sub(keep, text))


def slug_text(heading):
    text = heading
    text = re.sub(r"!\[([^\]]*)\]\([^)]*\)", r"\1", text)   # images: alt text
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)    # links: their text
    text = re.sub(r"\[([^\]]*)\]\[[^\]]*\]", r"\1", text)
    text = re.sub(r"<[^>]+>", "", text)                      # HTML tags
    text = text.strip().lower()
    text = "".join(c for c in text if c.isalnum() or c in "-_ " or c.isspace())
    return re.sub(r"\s", "-", text)


def anchors_of(path, cache={}):
    if path in cache:
        return cache[path]
    with open(path, encoding="utf-8") as f:
        lines = blank_code(f.read().split("\n"))
    seen, anchors = {}, set()

    def add(slug):
        original = slug
        while slug in seen:
            seen[original] += 1
            slug = f"{original}-{seen[original]}"
        seen[slug] = 0
        anchors.add(slug)

    prev = ""
    for line in lines:
        m = re.match(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$", line)
        if m:
            add(slug_text(m.group(2) or ""))
        elif re.match(r"^ {0,3}=+[ \t]*$", line) and prev.strip() \
                and not re.match(r"^\s*([|>#*+-]|\d+[.)])", prev):
            add(slug_text(prev))
        for a in re.findall(r"<a\s[^>]*(?:name|id)=\"([^\"]+)\"", line):
            anchors.add(a)
        prev = line
    cache[path] = anchors
    return anchors


INLINE_LINK = re.compile(r"\]\(\s*(<[^>\n]*>|[^)\s]+)(?:\s+(?:\"[^\"]*\"|'[^']*'))?\s*\)")
REF_DEF = re.compile(r"^ {0,3}\[[^\]]+\]:\s*(<[^>\n]*>|\S+)", re.M)


def links_in(path):
    """(line number, target) of every link outside code."""
    with open(path, encoding="utf-8") as f:
        lines = blank_code(f.read().split("\n"))
    found, start = [], 0
    # paragraphs: inline code cannot cross a blank line
    for i in range(len(lines) + 1):
        if i == len(lines) or not lines[i].strip():
            if start < i:
                text = strip_inline("\n".join(lines[start:i]))
                for rx in (INLINE_LINK, REF_DEF):
                    for m in rx.finditer(text):
                        line = start + 1 + text.count("\n", 0, m.start(1))
                        found.append((line, m.group(1).strip("<>")))
            start = i + 1
    return sorted(found)


def check_links():
    problems = []
    for path in markdown_files():
        for line, target in links_in(path):
            if re.match(r"^(https?:|mailto:)", target, re.I):
                continue
            where, _, fragment = target.partition("#")
            where = urllib.parse.unquote(where)
            if where.startswith("/"):
                resolved = os.path.normpath(where.lstrip("/"))
            elif where:
                resolved = os.path.normpath(os.path.join(os.path.dirname(path), where))
            else:
                resolved = path
            if not os.path.exists(resolved):
                problems.append(f"{path}:{line}: broken link ({target}): {resolved} does not exist")
                continue
            if not fragment:
                continue
            fragment = urllib.parse.unquote(fragment)
            if not resolved.endswith(".md") or not os.path.isfile(resolved):
                problems.append(f"{path}:{line}: broken link ({target}): an anchor on {resolved}, which is not a Markdown file")
            elif fragment not in anchors_of(resolved):
                problems.append(f"{path}:{line}: broken link ({target}): {resolved} has no heading whose anchor is #{fragment}")
    return problems


HELP_MARK = re.compile(r"^<!-- help: (mpit-tuner(?: [a-z0-9-]+)*) -->\s*$")


def help_blocks(lines):
    """(command, index of the opening fence, index of the closing fence)."""
    blocks = []
    for i, line in enumerate(lines):
        m = HELP_MARK.match(line)
        if not m:
            continue
        fence = re.match(r"^(`{3,})text\s*$", lines[i + 1]) if i + 1 < len(lines) else None
        if not fence:
            sys.exit(f"{CLI_PAGE}:{i + 2}: a ```text fence must follow the line `{line.strip()}`")
        close = next((j for j in range(i + 2, len(lines))
                      if re.match(rf"^{fence.group(1)}`*\s*$", lines[j])), None)
        if close is None:
            sys.exit(f"{CLI_PAGE}:{i + 2}: the help block of `{m.group(1)}` is not closed")
        blocks.append((m.group(1), i + 1, close))
    return blocks


def help_of(command):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("MPIT_") and k not in ("COLUMNS", "LINES")}
    args = [BIN] + command.split()[1:] + ["--help"]
    run = subprocess.run(args, capture_output=True, text=True, env=env, timeout=60)
    if run.returncode != 0:
        sys.exit(f"check-docs: `{' '.join(args)}` failed with status {run.returncode}:\n{run.stderr}")
    return [l.rstrip() for l in run.stdout.rstrip("\n").split("\n")]


def check_help(update):
    if not os.access(BIN, os.X_OK):
        print(f"check-docs: the binary {BIN} is missing: build it (MPICC=mpicc.mpich cargo build "
              f"-p mpit-tuner --target-dir target/mpich) or point MPIT_TUNER_BIN at one",
              file=sys.stderr)
        return ["no binary to compare docs/cli.md's help blocks with"]
    with open(CLI_PAGE, encoding="utf-8") as f:
        lines = f.read().split("\n")
    blocks = help_blocks(lines)
    if not blocks:
        return [f"{CLI_PAGE}: no `<!-- help: mpit-tuner ... -->` block found"]
    problems, new = [], list(lines)
    for command, start, close in reversed(blocks):
        quoted = [l.rstrip() for l in lines[start + 1:close]]
        printed = help_of(command)
        if quoted == printed:
            continue
        if update:
            fence = "`" * max(3, 1 + max((len(m) for l in printed for m in re.findall(r"^`+", l)), default=0))
            new[start:close + 1] = [fence + "text"] + printed + [fence]
            print(f"check-docs: {CLI_PAGE}: `{command} --help` updated", file=sys.stderr)
        else:
            diff = "\n".join(difflib.unified_diff(
                quoted, printed, f"{CLI_PAGE} (line {start + 2})", f"{command} --help", lineterm=""))
            problems.append(f"{CLI_PAGE}:{start + 2}: `{command} --help` differs from the quoted text:\n{diff}")
    if update and new != lines:
        with open(CLI_PAGE, "w", encoding="utf-8") as f:
            f.write("\n".join(new))
    return problems


if MODE == "--update-help":
    problems = check_help(update=True)
    problems += check_links()
else:
    problems = check_links()
    if MODE != "--links-only":
        problems += check_help(update=False)
for p in problems:
    print(p, file=sys.stderr)
if problems:
    print(f"check-docs: {len(problems)} problem(s)", file=sys.stderr)
    if any("--help` differs" in p for p in problems):
        print("check-docs: rewrite the help blocks from the binary with "
              "bash scripts/check-docs.sh --update-help", file=sys.stderr)
    sys.exit(1)
print("check-docs: links and anchors resolve" + ("" if MODE == "--links-only" else
      "; docs/cli.md quotes the binary's help"), file=sys.stderr)
PY
