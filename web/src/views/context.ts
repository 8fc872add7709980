// What every view receives from the app: the model, the current state and the analysed run;
// and the contract of a tab view (ViewDefinition), which views/index.ts registers.
// View components never fetch or keep global state: they draw what they are passed and report
// user actions through callbacks. A tab view's registration (views/<name>/index.ts) says which
// attention it needs and asks the host for it.

import type { ApiClient, HeadReport, ImportanceResult, ModelInfo, RoleInfo, RunResult } from '../lib/api';
import { readableOn } from '../lib/colour';
import type { Scene } from '../lib/scene';
import type { ViewState } from '../lib/state';
import type { Units } from '../lib/units';
import type { MapView } from '../lib/maps';
import type { Region } from '../lib/long';
import type { Tensor } from '../lib/wire';

export interface ViewContext {
  model: ModelInfo;
  state: ViewState;
  /** The run at state.level (its tokens and words are always both present). */
  run: RunResult;
  units: Units;
  /** What the maps show for this run: state.maps, or 'weights' where the run cannot show it. */
  maps: MapView;
  /** Every head's ablation effect on this text (POST /api/importance), once measured; null before. */
  importance?: ImportanceResult | null;
  /** While importance is not there: 'measuring', or the server's message when it was refused. */
  importanceStatus?: string;
  /** Token positions the model generated (Generate) in this text; none for a typed text. */
  generated?: number[];
  /** A streamed run: the region of the text the head panel's zoomable map shows (token level). */
  region?: Region;
}

/** A view whose picture can be exported as SVG and PNG. */
export interface ExportableView {
  scene(): Scene | null;
  /** File name parts, e.g. ["layer2"]. */
  exportParts(): (string | number)[];
  /** What a file name starts with after "headscope": the page's model unless the view says
   *  otherwise (Compare models: ["A", "vs", "B"]). */
  exportSubject?(): string[];
  /** The caption's line of facts under the title, where the page's (model, layer, head, units,
   *  scale) does not describe the picture. */
  captionFacts?(): string;
}

/** What the app lends a tab view when it creates it. */
export interface ViewHost {
  /** Changes the view state (and with it the URL); the app then renders again. */
  change(patch: Partial<ViewState>): void;
  /** The server's attention (GET /api/attention): [n_layer or 1, n_head, U, U]. */
  attention: ApiClient['attention'];
  /** Activation and path patching (POST /api/patch). */
  patch: ApiClient['patch'];
  /** Each token's saliency for a metric (POST /api/saliency). */
  saliency: ApiClient['saliency'];
  /** The logit lens of a text (POST /api/logit_lens). */
  logitLens: ApiClient['logitLens'];
  /** One head's logit lens (POST /api/head_lens, decoders). */
  headLens: ApiClient['headLens'];
  /** A text's tokens (POST /api/tokenize). */
  tokenize: ApiClient['tokenize'];
  /** Composition scores of every pair of heads (POST /api/composition). */
  composition: ApiClient['composition'];
  /** Every head placed by how alike its attention is over a corpus (POST /api/head_map). */
  headMap: ApiClient['headMap'];
  /** A streamed run's pooled maps of every head of a layer (POST /api/overview); absent where
   *  the page has no server. */
  overview?: ApiClient['overview'];
  /** Exact weights of one head over a region of a streamed run (POST /api/tile). */
  tile?: ApiClient['tile'];
  /** Shows region `r` in the head panel's zoomable map (streamed runs). */
  showRegion?(r: Region): void;
  /** Every model the server serves (GET /api/models; the page's own is index 0) and a client
   *  that asks model `index`; absent where the page has no server (embedded results). */
  models?: { list: readonly ModelInfo[]; client(index: number): ApiClient };
}

/** A created tab view as the app drives it: shown in #views, exported by PNG/SVG. */
export interface MountedView extends ExportableView {
  readonly el: HTMLElement;
  /** Fetches what the view draws for `ctx` (through its host) and draws it.
   *  layer: [1, n_head, U, U], the attention of ctx.state.layer, which the app has fetched already. */
  render(ctx: ViewContext, layer: Tensor): Promise<void>;
}

/** One tab of the explorer, registered in views/index.ts (the tab order is the list's order). */
export interface ViewDefinition {
  /** The value of `view=` in the URL and of the tab's data-view; lower-case letters and '-'. */
  readonly id: string;
  /** The tab's text; the keyboard help lists it in lower case. */
  readonly label: string;
  /** Draws the map view the toolbar chose (weights, norm-weighted, rollout); otherwise it is given the weights. */
  readonly followsMaps?: boolean;
  /** Works on a long text whose maps were streamed (from the pooled overviews, /api/overview, or
   *  exact tiles, /api/tile); otherwise the page says why it cannot. */
  readonly streamed?: boolean;
  /** Drawn again when the head panel's zoomable map moves to another region (streamed runs). */
  readonly followsRegion?: boolean;
  /** Runs the model on prompts of its own (patching, the logit lens): embedded results, which
   *  carry one run and no model, leave it out. */
  readonly needsModel?: boolean;
  create(host: ViewHost): MountedView;
}

/** A MountedView from a component that already has `el`, `scene` and `exportParts`. */
export function mounted(
  view: ExportableView & { readonly el: HTMLElement },
  render: MountedView['render'],
): MountedView {
  return { el: view.el, scene: () => view.scene(), exportParts: () => view.exportParts(), render };
}

export function headReport(ctx: Pick<ViewContext, 'model' | 'run'>, layer: number, head: number): HeadReport {
  return ctx.run.heads[layer * ctx.model.n_head + head];
}

export function roleInfo(model: ModelInfo, id: string): RoleInfo {
  return (
    model.roles.find((r) => r.id === id) ?? {
      id,
      name: id,
      description: '',
      typical_function: '',
      literature: '',
      color: '#777777',
    }
  );
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
