// The view state of the explorer, and its round trip through the page URL, so that a view can
// be bookmarked, shared and restored (?text=…&layer=2&head=5&view=layer…).

import { SCALES, type ScaleName } from './colour';
import { parseMapView, type MapView } from './maps';

/** The id of a tab view registered in views/index.ts. */
export type ViewName = string;
export type Level = 'token' | 'word';

/** A head address: layer and head, both 0-based. */
export interface HeadRef {
  layer: number;
  head: number;
}

/** One path between two heads, sender before receiver, through one input of the receiver: what
 *  the Composition view asks the Patching view to trace (path patching). */
export interface PathRef {
  sender: HeadRef;
  receiver: HeadRef;
  input: 'q' | 'k' | 'v';
}

export interface ViewState {
  text: string;
  view: ViewName;
  layer: number;
  head: number;
  level: Level;
  hideSpecial: boolean;
  scale: ScaleName;
  /** Token (always a token index, never a word index) whose W_O decomposition is shown. */
  token: number;
  /** The two heads of the compare view. */
  compareA: HeadRef;
  compareB: HeadRef;
  /** Query position locked in the head-lines view (-1: none); in the units of `level`. */
  lock: number;
  /** What the maps show: weights, norm-weighted or rollout (lib/maps.ts). */
  maps: MapView;
  /** The path the Patching view traces on opening (null: none), in the URL as path=17.8,18.7,k. */
  path: PathRef | null;
}

export const DEFAULT_TEXT = "The animal didn't cross the street because it was too tired.";

export const DEFAULT_STATE: ViewState = {
  text: DEFAULT_TEXT,
  view: 'layer',
  layer: 0,
  head: 0,
  level: 'token',
  hideSpecial: false,
  scale: 'linear',
  token: 1,
  compareA: { layer: 0, head: 0 },
  compareB: { layer: 0, head: 1 },
  lock: -1,
  maps: 'weights',
  path: null,
};

export interface ModelShape {
  n_layer: number;
  n_head: number;
}

function headRefToString(r: HeadRef): string {
  return `${r.layer}.${r.head}`;
}

function pathToString(p: PathRef): string {
  return `${headRefToString(p.sender)},${headRefToString(p.receiver)},${p.input}`;
}

/** "17.8,18.7,k": sender, receiver (0-based, the receiver in a later layer) and the receiver's input. */
function parsePath(raw: string | null, shape: ModelShape): PathRef | null {
  const m = raw ? /^(\d+\.\d+),(\d+\.\d+),([qkv])$/.exec(raw) : null;
  if (!m) return null;
  const none = { layer: -1, head: -1 };
  const sender = parseHeadRef(m[1], shape, none),
    receiver = parseHeadRef(m[2], shape, none);
  if (sender.layer < 0 || receiver.layer <= sender.layer) return null;
  return { sender, receiver, input: m[3] as PathRef['input'] };
}

function clampInt(raw: string | null, lo: number, hi: number, fallback: number): number {
  if (raw === null || !/^-?\d+$/.test(raw)) return fallback;
  const v = Number(raw);
  return v < lo || v > hi ? fallback : v;
}

function parseHeadRef(raw: string | null, shape: ModelShape, fallback: HeadRef): HeadRef {
  const m = raw ? /^(\d+)\.(\d+)$/.exec(raw) : null;
  if (!m) return fallback;
  const layer = Number(m[1]),
    head = Number(m[2]);
  return layer < shape.n_layer && head < shape.n_head ? { layer, head } : fallback;
}

/** The head Compare sets beside `a`: the next head of its layer (the next layer's first head
 *  after the last one; `a` itself in a one-head model). */
export function compareNext(a: HeadRef, shape: ModelShape): HeadRef {
  if (a.head + 1 < shape.n_head) return { layer: a.layer, head: a.head + 1 };
  return shape.n_layer > 1 ? { layer: (a.layer + 1) % shape.n_layer, head: 0 } : a;
}

/** Entering Compare: the selected head becomes A (and the next head B) unless it is already one
 *  of the two. */
export function enterCompare(s: ViewState, shape: ModelShape): Pick<ViewState, 'compareA' | 'compareB'> {
  const selected = { layer: s.layer, head: s.head };
  const same = (r: HeadRef) => r.layer === s.layer && r.head === s.head;
  if (same(s.compareA) || same(s.compareB)) return { compareA: s.compareA, compareB: s.compareB };
  return { compareA: selected, compareB: compareNext(selected, shape) };
}

/** Texts whose URL encoding is longer than this stay out of the URL: the server refuses a request
 *  line over 8 KiB (414), so a long document's URL could not be opened again. */
export const MAX_URL_TEXT = 6000;

/** Serialises the state; fields equal to the default are left out to keep URLs short. A text
 *  too long for a URL (MAX_URL_TEXT) is left out too: reopening the URL shows the default text. */
export function stateToQuery(s: ViewState): string {
  const p = new URLSearchParams();
  const d = DEFAULT_STATE;
  if (s.text !== d.text && encodeURIComponent(s.text).length <= MAX_URL_TEXT) p.set('text', s.text);
  if (s.view !== d.view) p.set('view', s.view);
  p.set('layer', String(s.layer));
  p.set('head', String(s.head));
  if (s.level !== d.level) p.set('level', s.level);
  if (s.hideSpecial) p.set('special', 'hide');
  if (s.scale !== d.scale) p.set('scale', s.scale);
  if (s.token !== d.token) p.set('token', String(s.token));
  if (s.view === 'compare') {
    p.set('a', headRefToString(s.compareA));
    p.set('b', headRefToString(s.compareB));
  }
  if (s.lock >= 0) p.set('lock', String(s.lock));
  if (s.maps !== d.maps) p.set('maps', s.maps);
  if (s.view === 'patching' && s.path) p.set('path', pathToString(s.path));
  return p.toString();
}

/**
 * Reads a state from a query string. Anything missing, malformed or out of the model's range
 * falls back to the default, so a hand-edited or stale URL still opens a valid view.
 * views: the registered view ids (views/index.ts, VIEW_IDS); any other `view=` opens the default.
 */
export function stateFromQuery(query: string, shape: ModelShape, views: readonly ViewName[]): ViewState {
  const p = new URLSearchParams(query.startsWith('?') ? query.slice(1) : query);
  const d = DEFAULT_STATE;
  const text = p.get('text');
  const view = p.get('view');
  const scale = p.get('scale') as ScaleName | null;
  const level = p.get('level');
  const layer = clampInt(p.get('layer'), 0, shape.n_layer - 1, d.layer);
  const head = clampInt(p.get('head'), 0, shape.n_head - 1, d.head);
  return {
    text: text !== null && text.trim() !== '' ? text : d.text,
    view: view !== null && views.includes(view) ? view : d.view,
    layer,
    head,
    level: level === 'word' ? 'word' : 'token',
    hideSpecial: p.get('special') === 'hide',
    scale: scale !== null && SCALES.includes(scale) ? scale : d.scale,
    token: clampInt(p.get('token'), 0, 1 << 20, d.token),
    // Without a and b, Compare starts from the selected head and the next one of its layer.
    compareA: parseHeadRef(p.get('a'), shape, { layer, head }),
    compareB: parseHeadRef(p.get('b'), shape, compareNext({ layer, head }, shape)),
    lock: clampInt(p.get('lock'), 0, 1 << 20, -1),
    maps: parseMapView(p.get('maps')),
    path: parsePath(p.get('path'), shape),
  };
}
