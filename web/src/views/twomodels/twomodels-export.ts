// The exports of "Compare models": the view as a Scene (PNG and SVG through lib/export.ts, like
// every other view) and the roles of every head of both models as CSV. Pure functions, tested in
// twomodels-export.test.ts. Layers and heads are counted from 1, as on the page.

import type { LinkResult, ModelInfo, RunResult } from '../../lib/api';
import { csvField, csvPreamble } from '../../lib/export';
import { percent } from '../../lib/format';
import { headTag } from '../../lib/numbering';
import type { Scene, SceneItem } from '../../lib/scene';
import { THEME } from '../../lib/theme';
import { roleInfo } from '../context';
import { censusRows, roleCensus, type CensusEntry } from './align';

/** One side of the view: its model and its run (null while it has none). */
export interface TwoModelsSide {
  model: ModelInfo;
  run: RunResult | null;
}

/** The answer to "which heads link A → B?" on one side: the tokens it used and its heads. */
export interface LinkAnswer {
  from: string;
  to: string;
  heads: LinkResult['heads'];
}

const PAD = 12;
const SIDE_W = 330;
const SIDE_GAP = 28;
const GRID_TOP = 74;
/** The height of both grids: rows at one height sit at one relative depth. */
export const GRID_H = 360;
const LABEL_W = 22;
const ROW_H = 17;
/** Heads listed per side under "which heads link A → B?". */
const LINK_ROWS = 8;

function text(x: number, y: number, s: string, size = 11, more: Partial<SceneItem> = {}): SceneItem {
  return { kind: 'text', x, y, text: s, size, fill: THEME.text, ...more } as SceneItem;
}

/** Every head of one model as a cell coloured by its primary role, rows = layers (input at the top). */
function gridItems(side: TwoModelsSide, x0: number): SceneItem[] {
  const { model: m, run } = side;
  const items: SceneItem[] = [
    text(x0, 22, m.name, 13, { weight: 'bold' }),
    text(
      x0,
      38,
      `${m.architecture} · ${m.causal ? 'decoder' : 'encoder'} · ${m.n_layer} layers × ${m.n_head} heads`,
      10,
      { fill: THEME.muted },
    ),
    text(
      x0,
      52,
      !run
        ? 'no run: this model could not read the text'
        : run.truncated
          ? `reads at most ${run.n_tokens} tokens: only the beginning of the text`
          : `${run.n_tokens} tokens`,
      10,
      { fill: THEME.muted },
    ),
  ];
  const gw = Math.min(SIDE_W - LABEL_W, m.n_head * 30);
  const cw = gw / m.n_head,
    ch = GRID_H / m.n_layer;
  const gx = x0 + LABEL_W;
  items.push(text(gx, GRID_TOP - 6, `heads 1–${m.n_head} →`, 9, { fill: THEME.muted }));
  const every = m.n_layer > 12 ? 5 : 1;
  for (let l = 0; l < m.n_layer; l++) {
    const y = GRID_TOP + l * ch;
    if (l === 0 || (l + 1) % every === 0)
      items.push(text(gx - 4, y + ch / 2 + 3, String(l + 1), 9, { fill: THEME.muted, anchor: 'end' }));
    for (let hd = 0; hd < m.n_head && run; hd++) {
      const role = roleInfo(m, run.heads[l * m.n_head + hd].roles.primary.id);
      items.push({
        kind: 'rect',
        x: gx + hd * cw,
        y,
        w: Math.max(0.5, cw - 1),
        h: Math.max(0.5, ch - 1),
        fill: role.color,
      });
    }
  }
  items.push(text(x0, GRID_TOP + GRID_H / 2, 'layer', 9, { fill: THEME.muted, rotate: -90, anchor: 'middle' }));
  return items;
}

/** The census as a table: a row per role some head of either model has, counts, shares and bars. */
function censusItems(sides: TwoModelsSide[], top: number): { items: SceneItem[]; bottom: number } {
  const counts = sides.map((s) =>
    s.run
      ? roleCensus(
          s.run.heads,
          s.model.roles.map((r) => r.id),
        )
      : null,
  );
  const items: SceneItem[] = [
    text(PAD, top, 'Roles in each model (primary role of each head on this text)', 12, { weight: 'bold' }),
  ];
  if (!counts[0] || !counts[1]) {
    items.push(text(PAD, top + 18, 'The census needs both models’ runs.', 11, { fill: THEME.muted }));
    return { items, bottom: top + 30 };
  }
  const [a, b] = counts as [CensusEntry[], CensusEntry[]];
  const col = (s: number) => PAD + 170 + s * 220;
  let y = top + 20;
  sides.forEach((s, i) =>
    items.push(text(col(i), y, `${s.model.name} (${s.model.n_layer * s.model.n_head} heads)`, 10, { weight: 'bold' })),
  );
  for (const id of censusRows(a, b)) {
    y += ROW_H;
    const info = roleInfo(sides[0].model.roles.some((r) => r.id === id) ? sides[0].model : sides[1].model, id);
    items.push({ kind: 'rect', x: PAD, y: y - 9, w: 10, h: 10, fill: info.color, rx: 2 });
    items.push(text(PAD + 16, y, info.name, 11));
    [a, b].forEach((list, i) => {
      const e = list.find((x) => x.id === id) ?? { id, count: 0, share: 0 };
      items.push({ kind: 'rect', x: col(i), y: y - 9, w: Math.max(0, e.share * 110), h: 10, fill: info.color });
      items.push(text(col(i) + 116, y, `${e.count} (${percent(e.share)})`, 10, { mono: true }));
    });
  }
  return { items, bottom: y + 12 };
}

/** The heads each model ranked for A → B, when the question was asked. */
function linkItems(
  sides: TwoModelsSide[],
  links: (LinkAnswer | null)[],
  top: number,
): { items: SceneItem[]; bottom: number } {
  const items: SceneItem[] = [text(PAD, top, 'Which heads link A → B?', 12, { weight: 'bold' })];
  let bottom = top;
  sides.forEach((s, i) => {
    const x = PAD + i * (SIDE_W + SIDE_GAP);
    const answer = links[i];
    let y = top + 18;
    items.push(
      text(x, y, `${s.model.name}: ${answer ? `from ‘${answer.from}’ to ‘${answer.to}’` : 'no answer'}`, 10, {
        fill: THEME.muted,
      }),
    );
    for (const hd of answer?.heads.slice(0, LINK_ROWS) ?? []) {
      y += 15;
      const role = roleInfo(s.model, hd.roles.primary.id);
      items.push({ kind: 'rect', x, y: y - 8, w: 9, h: 9, fill: role.color, rx: 2 });
      items.push(
        text(x + 14, y, `${headTag(hd.layer, hd.head)}  ${(hd.weight ?? 0).toFixed(2)}  ${hd.roles.primary.label}`, 10),
      );
    }
    bottom = Math.max(bottom, y);
  });
  return { items, bottom: bottom + 10 };
}

/** The view as a scene: both grids side by side (one height), the census, and the A → B answers
 *  when they were asked. */
export function twoModelsScene(sides: TwoModelsSide[], links: (LinkAnswer | null)[] | null): Scene {
  const items: SceneItem[] = [];
  sides.forEach((s, i) => items.push(...gridItems(s, PAD + i * (SIDE_W + SIDE_GAP))));
  items.push(
    text(
      PAD,
      GRID_TOP + GRID_H + 18,
      'Layers counted from 1, the input at the top; rows at one height sit at one relative depth.',
      10,
      {
        fill: THEME.muted,
      },
    ),
  );
  const census = censusItems(sides, GRID_TOP + GRID_H + 46);
  items.push(...census.items);
  let bottom = census.bottom;
  if (links) {
    const l = linkItems(sides, links, bottom + 16);
    items.push(...l.items);
    bottom = l.bottom;
  }
  return { width: PAD * 2 + sides.length * SIDE_W + SIDE_GAP, height: bottom + 8, background: THEME.panel, items };
}

/** One row per head of each model: the model, layer and head counted from 1, the KV head, the
 *  roles with their scores, and the evidence in words; after the lines of csvPreamble. */
export function twoModelsCsv(sides: TwoModelsSide[], textAnalysed: string): string {
  const names = sides.map((s) => s.model.name).join(' and ');
  const header = [
    'model',
    'layer',
    'head',
    'kv_head',
    'primary_role',
    'primary_score',
    'secondary_role',
    'secondary_score',
    'tokens',
    'evidence',
  ];
  const lines = [...csvPreamble('roles of every head of two models', names, textAnalysed), header.join(',')];
  for (const { model, run } of sides)
    for (const h of run?.heads ?? [])
      lines.push(
        [
          model.name,
          h.layer + 1,
          h.head + 1,
          h.kv_head + 1,
          h.roles.primary.id,
          h.roles.primary.score,
          h.roles.secondary.id,
          h.roles.secondary.score,
          run!.n_tokens,
          h.roles.primary.evidence,
        ]
          .map(csvField)
          .join(','),
      );
  return lines.join('\r\n') + '\r\n';
}
