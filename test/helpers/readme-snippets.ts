import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { REPO_ROOT } from './packed-package';

/** One ```ts block of README.md, CONTRIBUTING.md or docs/*.md. */
export interface ReadmeSnippet {
  /** The file it is written to in the temp app. */
  file: string;
  /** The Markdown file it comes from, relative to the repository (`README.md`, `docs/health.md`). */
  source: string;
  /** Line of `source` of the block's first code line (line 1 of `file`). */
  line: number;
  code: string;
}

/** A Markdown file of the repository: its path relative to the repository, and its text. */
export interface MarkdownFile {
  path: string;
  text: string;
}

const FENCE = /^```ts\n([\s\S]*?)^```$/gm;
/** A quick start block names its file on its first line: `// orders.service.ts: …`. */
const FILE_NAME = /^\/\/ ([\w.-]+\.ts)\b/;
/** A class declaration at the start of a line … */
const CLASS_LINE = /^(?:export\s+)?class\s+\w+/m;
/** … and a decorator at the start of a line: a decorated class, not a method of one. */
const DECORATOR_LINE = /^@\w+/m;

export function readReadme(): string {
  return readFileSync(join(REPO_ROOT, 'README.md'), 'utf8');
}

/** The documentation whose snippets and links are tested: README.md, CONTRIBUTING.md and docs/*.md. */
export function readDocumentation(root = REPO_ROOT): MarkdownFile[] {
  const docs = readdirSync(join(root, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .sort()
    .map((name) => `docs/${name}`);
  return ['README.md', 'CONTRIBUTING.md', ...docs].map((path) => ({
    path,
    text: readFileSync(join(root, path), 'utf8'),
  }));
}

/**
 * The section under `## <heading>` up to the next `## ` heading, as [start offset, end offset] of README.md.
 */
function section(readme: string, heading: string): [number, number] {
  const start = readme.indexOf(`\n## ${heading}\n`);
  if (start < 0) throw new Error(`README.md has no "## ${heading}" section`);
  const next = readme.indexOf('\n## ', start + 1);
  return [start, next < 0 ? readme.length : next];
}

function blocks(readme: string): { code: string; offset: number; line: number }[] {
  return [...readme.matchAll(FENCE)].map((m) => {
    const offset = m.index!;
    return { code: m[1], offset, line: readme.slice(0, offset).split('\n').length + 1 };
  });
}

/** The quick start's ```ts blocks, each under the file name its first line gives. */
export function quickStartFiles(readme: string): ReadmeSnippet[] {
  const [start, end] = section(readme, 'Quick start');
  return blocks(readme)
    .filter((b) => b.offset > start && b.offset < end)
    .map((b) => {
      const name = FILE_NAME.exec(b.code)?.[1];
      if (!name) throw new Error(`README.md line ${b.line}: a quick start block must start with "// <file>.ts"`);
      return { file: name, source: 'README.md', line: b.line, code: b.code };
    });
}

/**
 * The ```ts blocks of one Markdown file (outside README's quick start) that declare a full class: the block has a
 * `class` declaration and a decorator, each at the start of a line (`@Controller()` / `export class X {`). Other
 * blocks are fragments — a method without its class (indented decorators, or decorators without a class line: the
 * four cases), a call, an options object — and are not compiled. Each checked block is written to
 * `<source>-L<line>.ts` (`readme-L445.ts`, `docs-health-L12.ts`), a module of its own.
 */
export function classSnippets(text: string, source = 'README.md'): ReadmeSnippet[] {
  const [start, end] = source === 'README.md' ? section(text, 'Quick start') : [-1, -1];
  const prefix = source
    .replace(/\.md$/, '')
    .replace(/[^\w]+/g, '-')
    .toLowerCase();
  return blocks(text)
    .filter((b) => (b.offset < start || b.offset > end) && CLASS_LINE.test(b.code) && DECORATOR_LINE.test(b.code))
    .map((b) => ({ file: `${prefix}-L${b.line}.ts`, source, line: b.line, code: `${b.code}export {};\n` }));
}

/**
 * Names of the reader's own app that the class snippets use without declaring them (a snippet about an
 * idempotent payment does not declare the app's Payment entity). Everything else a snippet uses must be imported
 * by the snippet itself: from a package, or from a quick start file (`./entities`, `./app.module`).
 */
export const SNIPPET_PLACEHOLDERS = `/** The reader's own app, as the docs' snippets assume it (test/helpers/readme-snippets.ts). */
declare class Payment {
  id: number;
  amount: number;
}
declare class ChargeDto {
  amount: number;
}
declare class TransferDto {
  reference: string;
}
declare class PaymentProvider {
  charge(amount: number, options: { idempotencyKey: string }): Promise<void>;
}
declare class PaymentGateway {
  charge(amount: number, options: { idempotencyKey: string }): Promise<{ id: string; status: 'paid' | 'declined' }>;
}
declare class Balance {
  id: string;
  amount: number;
}
declare interface OrderPlaced {
  orderId: number;
  amount: number;
}
declare class WelcomeEmail {
  id: number;
  accountId: string;
  email: string;
}
declare class OperatorGuard {
  canActivate(context: unknown): boolean;
}
`;

/**
 * Rewrites `docs-health-L12.ts(12,3): error …` (and quick start file lines) into lines of the Markdown file the
 * block comes from: `docs/health.md:23:3 (docs-health-L12.ts): error …`.
 */
export function toReadmeLines(output: string, snippets: ReadmeSnippet[]): string {
  return output.replace(/^([\w.-]+\.ts)\((\d+),(\d+)\)/gm, (whole, file: string, line: string, col: string) => {
    const snippet = snippets.find((s) => s.file === file);
    return snippet ? `${snippet.source}:${snippet.line + Number(line) - 1}:${col} (${file})` : whole;
  });
}
