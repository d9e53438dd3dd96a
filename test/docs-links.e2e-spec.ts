import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { anchorsOf, checkLinks, formatBrokenLinks, githubSlug, linksOf } from './helpers/markdown-links';
import { REPO_ROOT } from './helpers/packed-package';
import { readDocumentation } from './helpers/readme-snippets';

/**
 * Every relative link and #anchor of README.md, CONTRIBUTING.md and docs/*.md resolves: the file exists, and the
 * anchor is a heading of the target file as GitHub spells its anchors. No network: external links are listed only.
 * The checker itself is tested first on fixtures, so that a broken link is shown to fail it.
 */
describe('documentation links (README.md, CONTRIBUTING.md, docs/*.md; no network)', () => {
  describe('the checker', () => {
    let root: string;

    beforeAll(() => {
      root = mkdtempSync(join(tmpdir(), 'outbox-links-'));
      mkdirSync(join(root, 'sample'));
      writeFileSync(join(root, 'sample', 'app.ts'), '');
    });

    afterAll(() => rmSync(root, { recursive: true, force: true }));

    it('spells anchors as GitHub does (code spans, punctuation, repeated headings)', () => {
      expect(githubSlug('`emit(pattern, payload, options?)`')).toBe('emitpattern-payload-options');
      expect(githubSlug('Testing your app: `nestjs-outbox/testing`')).toBe('testing-your-app-nestjs-outboxtesting');
      expect(githubSlug('2. `OrderPlaced` never exists without its order, nor the order without its event')).toBe(
        '2-orderplaced-never-exists-without-its-order-nor-the-order-without-its-event',
      );
      expect(githubSlug('What a key costs (benchmarks)')).toBe('what-a-key-costs-benchmarks');
      expect([...anchorsOf('# Setup\n\n## Setup\n\n```bash\n# not a heading\n```\n## Setup\n')]).toEqual([
        'setup',
        'setup-1',
        'setup-2',
      ]);
    });

    it('ignores links and headings inside code', () => {
      const text = 'See [a](a.md).\n\n```md\n[b](b.md)\n```\n\nand `[c](c.md)` and [`d`](d.md#x)\n';
      expect(linksOf(text)).toEqual([
        { target: 'a.md', line: 1 },
        { target: 'd.md#x', line: 7 },
      ]);
    });

    it('reports each broken link with its file and line, and passes the good ones', () => {
      const files = [
        {
          path: 'README.md',
          text: [
            '# Title', // 1
            '', // 2
            '[ok](docs/guide.md#real-heading) [ok too](#title) [code](sample/app.ts) [site](https://nestjs.com)', // 3
            '[missing file](docs/missing.md)', // 4
            '[missing anchor](#nope)', // 5
            '[missing anchor elsewhere](docs/guide.md#fake-heading)', // 6
          ].join('\n'),
        },
        { path: 'docs/guide.md', text: '# Real heading\n\n[back](../README.md#title) [out](../../etc/passwd)\n' },
      ];
      const report = checkLinks(files, root);
      expect(report.external).toEqual(['https://nestjs.com']);
      expect(report.broken).toEqual([
        { file: 'README.md', line: 4, target: 'docs/missing.md', reason: 'docs/missing.md does not exist' },
        { file: 'README.md', line: 5, target: '#nope', reason: 'README.md has no heading with the anchor #nope' },
        {
          file: 'README.md',
          line: 6,
          target: 'docs/guide.md#fake-heading',
          reason: 'docs/guide.md has no heading with the anchor #fake-heading',
        },
        { file: 'docs/guide.md', line: 3, target: '../../etc/passwd', reason: 'points outside the repository' },
      ]);
      expect(formatBrokenLinks(report.broken)).toContain('README.md:4: (docs/missing.md) — docs/missing.md does not');
    });
  });

  it('every relative link and #anchor of the documentation resolves', () => {
    const docs = readDocumentation();
    expect(docs.map((d) => d.path)).toEqual(expect.arrayContaining(['README.md', 'CONTRIBUTING.md']));
    expect(docs.length).toBeGreaterThan(10);
    const { broken } = checkLinks(docs, REPO_ROOT);
    expect(formatBrokenLinks(broken)).toBe('');
  });
});
