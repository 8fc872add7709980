// Exports: the statistics of every head as CSV and JSON, and the current view as SVG and PNG
// (both drawn from the same Scene).

import type { HeadReport, ModelInfo, RunResult, StatInfo } from './api';
import { csvStatKeys } from './statistics';
import { pixelsCanvas } from './heatmap';
import { drawScene, sceneToSvg, type Scene } from './scene';
import { linksText, recognisedText, tokenText } from './tokens';

/** RFC 4180 quoting: fields with a comma, quote or line break are quoted, quotes doubled. */
export function csvField(v: string | number | null | undefined): string {
  if (v === null || v === undefined) return '';
  const s = typeof v === 'number' ? (Number.isFinite(v) ? String(v) : '') : v;
  return /[",\r\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
}

/** What every export says about its numbers: the page's numbering (lib/numbering.ts). */
export const EXPORT_NUMBERING =
  'layers, heads and key/value heads counted from 1 as on the page (Layer 1 is the first layer; the API index is one less); token positions counted from 0';

/** Lines that start with "#" before the column names: what the file holds, the model, the text
 *  (as a JSON string, so that it stays on one line) and the numbering. */
export function csvPreamble(what: string, modelName: string, text: string, numbering = EXPORT_NUMBERING): string[] {
  return [
    `# headscope ${what}`,
    `# model: ${modelName}`,
    `# text: ${JSON.stringify(text)}`,
    `# numbering: ${numbering}`,
  ];
}

/** One row per head: layer, head (counted from 1), roles, then every statistic at full
 *  precision, its columns those of the statistics catalogue (csvStatKeys); after the lines of
 *  csvPreamble. */
export function statsToCsv(run: RunResult, catalogue: readonly StatInfo[], modelName = ''): string {
  const columns = csvStatKeys(catalogue);
  const header = [
    'layer',
    'head',
    'level',
    'special',
    'primary_role',
    'primary_score',
    'secondary_role',
    'secondary_score',
    ...columns,
    'evidence',
  ];
  const lines = [...csvPreamble('statistics of every head', modelName, run.text), header.join(',')];
  for (const h of run.heads) {
    const cells = [
      h.layer + 1,
      h.head + 1,
      run.level,
      run.special,
      h.roles.primary.id,
      h.roles.primary.score,
      h.roles.secondary.id,
      h.roles.secondary.score,
      ...columns.map((k) => h.stats[k] as number | null),
      h.roles.primary.evidence,
    ];
    lines.push(cells.map(csvField).join(','));
  }
  return lines.join('\r\n') + '\r\n';
}

export interface StatsExport {
  model: Pick<ModelInfo, 'name' | 'architecture' | 'n_layer' | 'n_head' | 'd_model' | 'd_head'>;
  text: string;
  level: RunResult['level'];
  special: RunResult['special'];
  numbering: string;
  tokens: string[];
  heads: HeadReport[];
}

/** A head's report as the JSON export writes it: numbered from 1, and its links on the text
 *  written with readable tokens (the server's sentences may hold byte-level marks such as Ċ). */
function exportedHead(h: HeadReport, labels: string[]): HeadReport {
  const on = h.on_text;
  return {
    ...h,
    layer: h.layer + 1,
    head: h.head + 1,
    kv_head: h.kv_head + 1,
    ...(on
      ? {
          on_text: {
            ...on,
            links_text: linksText(on.links, labels),
            recognised_text: recognisedText(on.recognised_text, on.matching, labels),
          },
        }
      : {}),
  };
}

export function statsToJson(model: ModelInfo, run: RunResult): string {
  const labels = run.tokens.map(tokenText);
  const out: StatsExport = {
    model: {
      name: model.name,
      architecture: model.architecture,
      n_layer: model.n_layer,
      n_head: model.n_head,
      d_model: model.d_model,
      d_head: model.d_head,
    },
    text: run.text,
    level: run.level,
    special: run.special,
    numbering: EXPORT_NUMBERING,
    tokens: run.tokens.map(tokenText),
    heads: run.heads.map((h) => exportedHead(h, labels)),
  };
  return JSON.stringify(out, null, 2);
}

/** A file name from parts: "headscope-layer2-head5.svg". */
export function exportName(parts: (string | number)[], ext: string): string {
  return ['headscope', ...parts].join('-').replace(/[^A-Za-z0-9._-]+/g, '_') + '.' + ext;
}

// ---- browser-only helpers below ----

export function sceneSvg(scene: Scene): string {
  return sceneToSvg(scene, (p) => pixelsCanvas(p).toDataURL('image/png'));
}

export function scenePng(scene: Scene, pixelRatio = 2): Promise<Blob> {
  const canvas = document.createElement('canvas');
  canvas.width = Math.ceil(scene.width * pixelRatio);
  canvas.height = Math.ceil(scene.height * pixelRatio);
  const ctx = canvas.getContext('2d')!;
  ctx.scale(pixelRatio, pixelRatio);
  drawScene(ctx, scene, pixelsCanvas);
  return new Promise((resolve, reject) =>
    canvas.toBlob((b) => (b ? resolve(b) : reject(new Error('PNG encoding failed'))), 'image/png'),
  );
}

export function download(data: Blob | string, filename: string, type = 'text/plain'): void {
  const blob = typeof data === 'string' ? new Blob([data], { type }) : data;
  const url = URL.createObjectURL(blob);
  const a = document.createElement('a');
  a.href = url;
  a.download = filename;
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}
