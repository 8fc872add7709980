// A view described once as a flat list of shapes, then drawn either as SVG (vector export) or on
// a canvas (PNG export). Every view that can be exported builds a Scene of what it shows, so the
// two exports always agree with each other.

export interface Pixels {
  width: number;
  height: number;
  data: Uint8ClampedArray; // RGBA, row-major
}

export type SceneItem =
  /** fill 'none' draws the outline only. */
  | {
      kind: 'rect';
      x: number;
      y: number;
      w: number;
      h: number;
      fill: string;
      stroke?: string;
      strokeWidth?: number;
      rx?: number;
    }
  | { kind: 'line'; x1: number; y1: number; x2: number; y2: number; stroke: string; width: number; opacity?: number }
  | {
      kind: 'text';
      x: number;
      y: number;
      text: string;
      size: number;
      fill: string;
      anchor?: 'start' | 'middle' | 'end';
      weight?: 'normal' | 'bold';
      /** Degrees, clockwise, around (x, y). */
      rotate?: number;
      mono?: boolean;
    }
  /** A raster (a heatmap at one pixel per cell), stretched to w × h without smoothing. */
  | { kind: 'image'; x: number; y: number; w: number; h: number; pixels: Pixels };

export interface Scene {
  width: number;
  height: number;
  background: string;
  items: SceneItem[];
}

const FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, 'Helvetica Neue', Arial, sans-serif";
const MONO = "ui-monospace, 'SFMono-Regular', Menlo, Consolas, monospace";

export function escapeXml(s: string): string {
  return s.replace(
    /[<>&'"]/g,
    (c) => ({ '<': '&lt;', '>': '&gt;', '&': '&amp;', "'": '&apos;', '"': '&quot;' })[c] as string,
  );
}

function n(v: number): string {
  return Number.isInteger(v) ? String(v) : v.toFixed(2);
}

/** Rasters with at most this many cells are written as one <rect> per cell (pure vector). */
export const MAX_VECTOR_CELLS = 40000;

/**
 * Writes the scene as a standalone SVG document. Small rasters become one rect per cell; larger
 * ones are embedded as PNG through `encodePng` (a data: URL), which keeps the file small.
 */
export function sceneToSvg(scene: Scene, encodePng: (p: Pixels) => string): string {
  const totalCells = scene.items.reduce(
    (acc, it) => acc + (it.kind === 'image' ? it.pixels.width * it.pixels.height : 0),
    0,
  );
  const vectorCells = totalCells <= MAX_VECTOR_CELLS;
  const out: string[] = [];
  out.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${n(scene.width)}" height="${n(scene.height)}" viewBox="0 0 ${n(scene.width)} ${n(scene.height)}" font-family="${escapeXml(FONT)}">`,
  );
  out.push(`<rect width="100%" height="100%" fill="${scene.background}"/>`);
  for (const it of scene.items) {
    switch (it.kind) {
      case 'rect':
        out.push(
          `<rect x="${n(it.x)}" y="${n(it.y)}" width="${n(it.w)}" height="${n(it.h)}" fill="${it.fill}"` +
            (it.stroke ? ` stroke="${it.stroke}" stroke-width="${n(it.strokeWidth ?? 1)}"` : '') +
            (it.rx ? ` rx="${n(it.rx)}"` : '') +
            '/>',
        );
        break;
      case 'line':
        out.push(
          `<line x1="${n(it.x1)}" y1="${n(it.y1)}" x2="${n(it.x2)}" y2="${n(it.y2)}" stroke="${it.stroke}" stroke-width="${n(it.width)}"` +
            (it.opacity !== undefined && it.opacity < 1 ? ` stroke-opacity="${it.opacity.toFixed(3)}"` : '') +
            '/>',
        );
        break;
      case 'text': {
        const attrs = [`x="${n(it.x)}"`, `y="${n(it.y)}"`, `font-size="${n(it.size)}"`, `fill="${it.fill}"`];
        if (it.anchor && it.anchor !== 'start') attrs.push(`text-anchor="${it.anchor}"`);
        if (it.weight === 'bold') attrs.push('font-weight="bold"');
        if (it.mono) attrs.push(`font-family="${escapeXml(MONO)}"`);
        if (it.rotate) attrs.push(`transform="rotate(${n(it.rotate)} ${n(it.x)} ${n(it.y)})"`);
        out.push(`<text ${attrs.join(' ')}>${escapeXml(it.text)}</text>`);
        break;
      }
      case 'image': {
        const { width, height, data } = it.pixels;
        if (vectorCells) {
          const cw = it.w / width,
            ch = it.h / height;
          out.push('<g shape-rendering="crispEdges">');
          for (let y = 0; y < height; y++)
            for (let x = 0; x < width; x++) {
              const i = (y * width + x) * 4;
              const fill =
                '#' + [data[i], data[i + 1], data[i + 2]].map((c) => c.toString(16).padStart(2, '0')).join('');
              out.push(
                `<rect x="${n(it.x + x * cw)}" y="${n(it.y + y * ch)}" width="${n(cw)}" height="${n(ch)}" fill="${fill}"/>`,
              );
            }
          out.push('</g>');
        } else {
          out.push(
            `<image x="${n(it.x)}" y="${n(it.y)}" width="${n(it.w)}" height="${n(it.h)}" preserveAspectRatio="none" style="image-rendering:pixelated" href="${encodePng(it.pixels)}"/>`,
          );
        }
        break;
      }
    }
  }
  out.push('</svg>');
  return out.join('\n');
}

/** Minimal 2D context surface the scene needs (a real CanvasRenderingContext2D satisfies it). */
export type SceneContext = Pick<
  CanvasRenderingContext2D,
  | 'fillStyle'
  | 'strokeStyle'
  | 'lineWidth'
  | 'globalAlpha'
  | 'font'
  | 'textAlign'
  | 'textBaseline'
  | 'imageSmoothingEnabled'
  | 'fillRect'
  | 'strokeRect'
  | 'beginPath'
  | 'moveTo'
  | 'lineTo'
  | 'stroke'
  | 'fillText'
  | 'save'
  | 'restore'
  | 'translate'
  | 'rotate'
  | 'drawImage'
  | 'scale'
>;

/** Draws the scene on a canvas context; `toImage` turns a raster into something drawImage takes. */
export function drawScene(ctx: SceneContext, scene: Scene, toImage: (p: Pixels) => CanvasImageSource): void {
  ctx.fillStyle = scene.background;
  ctx.fillRect(0, 0, scene.width, scene.height);
  ctx.textBaseline = 'alphabetic';
  for (const it of scene.items) {
    switch (it.kind) {
      case 'rect':
        if (it.fill !== 'none') {
          ctx.fillStyle = it.fill;
          ctx.fillRect(it.x, it.y, it.w, it.h);
        }
        if (it.stroke) {
          ctx.strokeStyle = it.stroke;
          ctx.lineWidth = it.strokeWidth ?? 1;
          ctx.strokeRect(it.x, it.y, it.w, it.h);
        }
        break;
      case 'line':
        ctx.globalAlpha = it.opacity ?? 1;
        ctx.strokeStyle = it.stroke;
        ctx.lineWidth = it.width;
        ctx.beginPath();
        ctx.moveTo(it.x1, it.y1);
        ctx.lineTo(it.x2, it.y2);
        ctx.stroke();
        ctx.globalAlpha = 1;
        break;
      case 'text':
        ctx.save();
        ctx.font = `${it.weight === 'bold' ? 'bold ' : ''}${it.size}px ${it.mono ? MONO : FONT}`;
        ctx.fillStyle = it.fill;
        ctx.textAlign = it.anchor === 'middle' ? 'center' : it.anchor === 'end' ? 'right' : 'left';
        ctx.translate(it.x, it.y);
        if (it.rotate) ctx.rotate((it.rotate * Math.PI) / 180);
        ctx.fillText(it.text, 0, 0);
        ctx.restore();
        break;
      case 'image':
        ctx.imageSmoothingEnabled = false;
        ctx.drawImage(toImage(it.pixels), it.x, it.y, it.w, it.h);
        break;
    }
  }
}

/** What an exported picture says about itself, above the view (lib/export.ts, app.ts). */
export interface Caption {
  /** What the picture shows, e.g. "headscope · Layer heads view". */
  title: string;
  /** Model, layer, head and role, units and scale, in one line. */
  facts: string;
  /** The analysed text; long texts are cut after CAPTION_TEXT_LINES lines. */
  text: string;
}

/** Lines of the analysed text an exported picture repeats (a long document would bury the view). */
export const CAPTION_TEXT_LINES = 4;

/** Breaks `text` into lines of at most `chars` characters, at spaces where possible. */
export function wrapText(text: string, chars: number): string[] {
  const lines: string[] = [];
  let line = '';
  for (const word of text.replace(/\s+/g, ' ').trim().split(' ')) {
    for (let w = word; w.length > 0;) {
      const room = line ? chars - line.length - 1 : chars;
      if (w.length <= room) {
        line = line ? `${line} ${w}` : w;
        w = '';
      } else if (line) {
        lines.push(line);
        line = '';
      } else {
        lines.push(w.slice(0, chars));
        w = w.slice(chars);
      }
    }
  }
  if (line) lines.push(line);
  return lines;
}

/** The scene moved down under a caption band (title, facts, the text), so that an exported
 *  picture stands alone. */
export function withCaption(scene: Scene, c: Caption, colours: { text: string; muted: string }): Scene {
  const width = Math.max(scene.width, 520);
  const chars = Math.max(24, Math.floor((width - 24) / 6.4)); // 11 px text: about 6 px a character
  let lines = wrapText(`Text: “${c.text}”`, chars);
  if (lines.length > CAPTION_TEXT_LINES)
    lines = [...lines.slice(0, CAPTION_TEXT_LINES - 1), `${lines[CAPTION_TEXT_LINES - 1].slice(0, chars - 1)}…`];
  const head: SceneItem[] = [
    { kind: 'text', x: 12, y: 22, text: c.title, size: 15, fill: colours.text, weight: 'bold' },
    { kind: 'text', x: 12, y: 40, text: c.facts, size: 11, fill: colours.text },
    ...lines.map((text, i): SceneItem => ({
      kind: 'text',
      x: 12,
      y: 57 + i * 15,
      text,
      size: 11,
      fill: colours.muted,
    })),
  ];
  const dy = 57 + lines.length * 15;
  const moved = scene.items.map((it): SceneItem =>
    it.kind === 'line' ? { ...it, y1: it.y1 + dy, y2: it.y2 + dy } : { ...it, y: it.y + dy },
  );
  return { width, height: scene.height + dy, background: scene.background, items: [...head, ...moved] };
}
