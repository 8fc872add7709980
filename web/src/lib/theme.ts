// The explorer's colours, in one place so that a test can check every text/background pair
// for WCAG AA contrast (colour.test.ts) and the stylesheet reads them as CSS variables.

export const THEME = {
  page: '#f4f6f9',
  panel: '#ffffff',
  panelAlt: '#eef2f7',
  border: '#d3dae3',
  text: '#17202b',
  muted: '#4a5566',
  accent: '#1f5fa6',
  accentText: '#ffffff',
  focus: '#c2410c',
  good: '#17663a',
  warn: '#8a4b00',
  codeBg: '#e8edf3',
} as const;

/** Pairs that carry text: [foreground, background, what]. */
export const TEXT_PAIRS: readonly [string, string, string][] = [
  [THEME.text, THEME.page, 'body text on the page'],
  [THEME.text, THEME.panel, 'body text in panels'],
  [THEME.text, THEME.panelAlt, 'text in highlighted boxes'],
  [THEME.muted, THEME.panel, 'secondary text in panels'],
  [THEME.muted, THEME.page, 'secondary text on the page'],
  [THEME.muted, THEME.panelAlt, 'secondary text in highlighted boxes'],
  [THEME.accent, THEME.panel, 'links and active tabs'],
  [THEME.accentText, THEME.accent, 'text on accent buttons'],
  [THEME.good, THEME.panel, 'check marks'],
  [THEME.warn, THEME.panel, 'warnings'],
  [THEME.text, THEME.codeBg, 'code'],
];

export function applyTheme(root: HTMLElement): void {
  for (const [name, value] of Object.entries(THEME)) {
    root.style.setProperty('--' + name.replace(/[A-Z]/g, (c) => '-' + c.toLowerCase()), value);
  }
}
