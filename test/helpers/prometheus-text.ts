/** The lines of a Prometheus text exposition that are samples (no `# HELP` / `# TYPE` comments, no blank lines). */
export function sampleLines(text: string): string[] {
  return text.split('\n').filter((line) => line.length > 0 && !line.startsWith('#'));
}

/**
 * The value of the sample `name` whose labels include every given pair (undefined when there is none; when several
 * match, their sum, so a test notices a series it did not expect to be split).
 */
export function sampleOf(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  let total: number | undefined;
  for (const line of sampleLines(text)) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    if (!Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`))) continue;
    total = (total ?? 0) + Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return total;
}
