import { existsSync, readFileSync, statSync } from 'node:fs';
import { posix } from 'node:path';
import type { MarkdownFile } from './readme-snippets';

/** A relative link or `#anchor` of a Markdown file that does not resolve. */
export interface BrokenLink {
  /** The Markdown file holding the link, relative to the repository. */
  file: string;
  line: number;
  target: string;
  /** What is missing: the file, or the heading in it. */
  reason: string;
}

export interface LinkReport {
  broken: BrokenLink[];
  /** Links to other sites (http, https, mailto): listed, not fetched (the tests run without the network). */
  external: string[];
}

/** `[text](target)` and `![alt](target "title")`; the text may hold one level of brackets and line breaks. */
const INLINE_LINK = /!?\[(?:[^[\]]|\[[^\]]*\])*\]\(\s*<?([^\s)>]+)>?(?:\s+"[^"]*")?\s*\)/g;
/** `[label]: target` reference definitions. */
const REFERENCE = /^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)/gm;
/** `href="target"` in inline HTML. */
const HREF = /\bhref="([^"]+)"/g;
const HEADING = /^ {0,3}(#{1,6})\s+(.*?)(?:\s+#+)?\s*$/;
/** Explicit HTML anchors: `<a id="x">`, `<a name="x">`. */
const HTML_ANCHOR = /<a\s+(?:id|name)="([^"]+)"/g;
const EXTERNAL = /^(?:[a-z][a-z0-9+.-]*:)/i;

/**
 * The text with fenced code blocks and inline code spans blanked out (spaces; line breaks kept, so offsets and line
 * numbers stay those of the file): a `[x](y)` or a `# comment` inside code is neither a link nor a heading. A code
 * span ends at its paragraph, so a stray backtick cannot hide the rest of the file.
 */
export function withoutCode(text: string): string {
  const lines = text.split('\n');
  let fence: string | undefined;
  const prose = lines.map((line) => {
    const marker = /^ {0,3}(`{3,}|~{3,})/.exec(line)?.[1];
    if (fence) {
      if (marker && marker[0] === fence[0] && marker.length >= fence.length) fence = undefined;
      return ' '.repeat(line.length);
    }
    if (marker) {
      fence = marker;
      return ' '.repeat(line.length);
    }
    return line;
  });
  return prose.join('\n').replace(/(`+)(?:[^`\n]|\n(?!\n))+?\1/g, (code) => code.replace(/[^\n]/g, ' '));
}

/**
 * The anchor GitHub gives a heading: its text as rendered (code spans, emphasis and link syntax removed), lower
 * case, without punctuation (letters, digits, `-`, `_` and spaces stay), each space a `-`.
 */
export function githubSlug(heading: string): string {
  return heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/[`*]/g, '')
    .replace(/<[^>]+>/g, '')
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

/** Every anchor of a Markdown file: its headings' slugs (a repeated one gets `-1`, `-2`, …) and HTML anchors. */
export function anchorsOf(text: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  const prose = withoutCode(text);
  for (const line of prose.split('\n')) {
    const heading = HEADING.exec(line);
    if (!heading) continue;
    const slug = githubSlug(heading[2]);
    const count = seen.get(slug) ?? 0;
    seen.set(slug, count + 1);
    anchors.add(count === 0 ? slug : `${slug}-${count}`);
  }
  for (const match of prose.matchAll(HTML_ANCHOR)) anchors.add(match[1]);
  return anchors;
}

/** Every link target of a Markdown file outside code, with its line. */
export function linksOf(text: string): { target: string; line: number }[] {
  const prose = withoutCode(text);
  const lineAt = (offset: number) => prose.slice(0, offset).split('\n').length;
  return [INLINE_LINK, REFERENCE, HREF]
    .flatMap((pattern) => [...prose.matchAll(pattern)].map((m) => ({ target: m[1], line: lineAt(m.index!) })))
    .sort((a, b) => a.line - b.line);
}

/**
 * Checks every relative link and `#anchor` of `files` (paths relative to `root`): the target file or folder exists
 * (a Markdown file of `files` by its text, anything else on disk under `root`), and an anchor names a heading of
 * the target Markdown file. External links are listed, not fetched.
 */
export function checkLinks(files: MarkdownFile[], root: string): LinkReport {
  const texts = new Map(files.map((f) => [f.path, f.text]));
  const anchorCache = new Map<string, Set<string>>();
  const onDisk = (path: string) => existsSync(posix.join(root, path));
  const anchors = (path: string) => {
    let set = anchorCache.get(path);
    if (!set) {
      set = anchorsOf(texts.get(path) ?? readFileSync(posix.join(root, path), 'utf8'));
      anchorCache.set(path, set);
    }
    return set;
  };
  const broken: BrokenLink[] = [];
  const external: string[] = [];
  for (const file of files) {
    for (const { target, line } of linksOf(file.text)) {
      if (EXTERNAL.test(target)) {
        external.push(target);
        continue;
      }
      const hash = target.indexOf('#');
      const pathPart = hash < 0 ? target : target.slice(0, hash);
      const anchor = hash < 0 ? undefined : decodeURIComponent(target.slice(hash + 1));
      const resolved = pathPart ? posix.normalize(posix.join(posix.dirname(file.path), pathPart)) : file.path;
      const fail = (reason: string) => broken.push({ file: file.path, line, target, reason });
      if (resolved.startsWith('..') || posix.isAbsolute(resolved)) {
        fail('points outside the repository');
      } else if (!texts.has(resolved) && !onDisk(resolved)) {
        fail(`${resolved} does not exist`);
      } else if (anchor !== undefined) {
        if (!resolved.endsWith('.md') || (!texts.has(resolved) && statSync(posix.join(root, resolved)).isDirectory())) {
          fail(`#${anchor}: ${resolved} is not a Markdown file`);
        } else if (!anchors(resolved).has(anchor)) {
          fail(`${resolved} has no heading with the anchor #${anchor}`);
        }
      }
    }
  }
  return { broken, external };
}

/** One line per broken link: `docs/faq.md:12: [..](target) — reason`. */
export function formatBrokenLinks(broken: BrokenLink[]): string {
  return broken.map((b) => `${b.file}:${b.line}: (${b.target}) — ${b.reason}`).join('\n');
}
