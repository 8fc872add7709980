// What every view receives from the app: the model, the current state and the analysed run.
// Views never fetch or keep global state; the app passes them what they show (and the
// attention tensors they need) and listens to the callbacks they were given.

import type { HeadReport, ModelInfo, RoleInfo, RunResult } from '../lib/api';
import { readableOn } from '../lib/colour';
import type { Scene } from '../lib/scene';
import type { ViewState } from '../lib/state';
import type { Units } from '../lib/units';

export interface ViewContext {
  model: ModelInfo;
  state: ViewState;
  /** The run at state.level (its tokens and words are always both present). */
  run: RunResult;
  units: Units;
}

/** A view whose picture can be exported as SVG and PNG. */
export interface ExportableView {
  scene(): Scene | null;
  /** File name parts, e.g. ["layer2"]. */
  exportParts(): (string | number)[];
}

export function headReport(ctx: Pick<ViewContext, 'model' | 'run'>, layer: number, head: number): HeadReport {
  return ctx.run.heads[layer * ctx.model.n_head + head];
}

export function roleInfo(model: ModelInfo, id: string): RoleInfo {
  return model.roles.find((r) => r.id === id) ?? { id, name: id, description: '', typical_function: '', literature: '', color: '#777777' };
}

/** Short badge text for a role: its name's initials ("Previous token" → "PT"). */
export function roleBadge(name: string): string {
  const words = name.split(/[\s/-]+/).filter(Boolean);
  return (words.length === 1 ? words[0].slice(0, 2) : words.map((w) => w[0]).join('')).toUpperCase().slice(0, 3);
}

/** Inline style of a role badge: the role's colour with black or white text, whichever reads better. */
export function roleStyle(colour: string): string {
  return `background: ${colour}; color: ${readableOn(colour)}; border-color: ${colour}`;
}
