import { describe, expect, it } from 'vitest';
import { textBeforeByte } from './sentence-view';

describe('textBeforeByte', () => {
  it('cuts at a UTF-8 byte offset as the server counts it', () => {
    // "Grüße, " is 9 bytes (ü and ß take two each).
    expect(textBeforeByte('Grüße, Welt', 9)).toBe('Grüße, ');
    expect(textBeforeByte('abc', 10)).toBe('abc');
    expect(textBeforeByte('abc', 0)).toBe('');
  });
});
