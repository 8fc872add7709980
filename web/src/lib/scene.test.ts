import { describe, expect, it } from 'vitest';
import { CAPTION_TEXT_LINES, withCaption, wrapText, type Scene } from './scene';

describe('wrapText', () => {
  it('breaks at spaces and splits words longer than a line', () => {
    expect(wrapText('the cat sat on the mat', 10)).toEqual(['the cat', 'sat on the', 'mat']);
    expect(wrapText('abcdefghijkl xy', 5)).toEqual(['abcde', 'fghij', 'kl xy']);
  });
});

describe('withCaption', () => {
  const scene: Scene = {
    width: 600,
    height: 100,
    background: '#fff',
    items: [
      { kind: 'rect', x: 1, y: 2, w: 3, h: 4, fill: '#000' },
      { kind: 'line', x1: 0, y1: 10, x2: 5, y2: 20, stroke: '#000', width: 1 },
    ],
  };
  const colours = { text: '#000', muted: '#555' };

  it('puts title, facts and the text above the view and moves the view down', () => {
    const out = withCaption(
      scene,
      {
        title: 'headscope · Layer heads view',
        facts: 'm · Layer 1 (index 0) · Head 2 (index 1) – Sink',
        text: 'The trophy did not fit.',
      },
      colours,
    );
    const texts = out.items.filter((i) => i.kind === 'text').map((i) => (i.kind === 'text' ? i.text : ''));
    expect(texts).toEqual([
      'headscope · Layer heads view',
      'm · Layer 1 (index 0) · Head 2 (index 1) – Sink',
      'Text: “The trophy did not fit.”',
    ]);
    const dy = out.height - scene.height;
    expect(dy).toBeGreaterThan(50);
    expect(out.items[3]).toMatchObject({ kind: 'rect', y: 2 + dy });
    expect(out.items[4]).toMatchObject({ kind: 'line', y1: 10 + dy, y2: 20 + dy });
  });

  it('cuts a long text after a few lines', () => {
    const out = withCaption(scene, { title: 't', facts: 'f', text: 'word '.repeat(2000) }, colours);
    const lines = out.items.filter((i) => i.kind === 'text').slice(2);
    expect(lines.length).toBe(CAPTION_TEXT_LINES);
    expect(lines[lines.length - 1].kind === 'text' && lines[lines.length - 1].text.endsWith('…')).toBe(true);
  });
});
