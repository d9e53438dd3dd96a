import { report } from './bench-kit';
import { BENCHES } from './benches';

/** `npm run bench` runs every benchmark; `npm run bench -- relay latency` runs the named ones. */
async function main(): Promise<void> {
  const names = process.argv.slice(2).filter((a) => !a.startsWith('-'));
  const selected = names.length ? names : Object.keys(BENCHES);
  const unknown = selected.filter((n) => !BENCHES[n]);
  if (unknown.length) {
    console.error(
      `Unknown benchmark(s): ${unknown.join(', ')}. Known: ${Object.keys(BENCHES).join(', ') || '(none yet)'}`,
    );
    process.exit(2);
  }
  let failed = false;
  for (const name of selected) {
    try {
      const bench = (await BENCHES[name]()).default;
      report(name, await bench());
    } catch (error) {
      failed = true;
      console.error(`Benchmark ${name} failed:`, error);
    }
  }
  process.exit(failed ? 1 : 0);
}

void main();
