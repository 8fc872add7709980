import { describe, expect, it } from 'vitest';
import {
  base64ToBytes,
  bytesToBase64,
  decodeTensor,
  decodeTypedArray,
  DTYPE_FLOAT32,
  DTYPE_UINT8,
  row,
  WireError,
} from './wire';

/** Builds a reply byte by byte, independently of the decoder: header fields then values. */
function reply(dtype: number, shape: number[], values: number[]): ArrayBuffer {
  const item = dtype === DTYPE_FLOAT32 ? 4 : 1;
  const buf = new ArrayBuffer(12 + 4 * shape.length + values.length * item);
  const v = new DataView(buf);
  'HST1'.split('').forEach((c, i) => v.setUint8(i, c.charCodeAt(0)));
  v.setUint32(4, dtype, true);
  v.setUint32(8, shape.length, true);
  shape.forEach((d, i) => v.setUint32(12 + 4 * i, d, true));
  const off = 12 + 4 * shape.length;
  values.forEach((x, i) => (dtype === DTYPE_FLOAT32 ? v.setFloat32(off + 4 * i, x, true) : v.setUint8(off + i, x)));
  return buf;
}

describe('decodeTensor', () => {
  it('reads shape and float32 values in row-major order', () => {
    const t = decodeTensor(reply(DTYPE_FLOAT32, [1, 2, 2, 2], [0.25, 0.75, 1, 0, 0.5, 0.5, 0.125, 0.875]));
    expect(t.shape).toEqual([1, 2, 2, 2]);
    expect(Array.from(t.data)).toEqual([0.25, 0.75, 1, 0, 0.5, 0.5, 0.125, 0.875]);
  });

  it('expands uint8 values to byte / 255', () => {
    const t = decodeTensor(reply(DTYPE_UINT8, [1, 3], [0, 51, 255]));
    expect(t.shape).toEqual([1, 3]);
    expect(t.data[0]).toBe(0);
    expect(t.data[1]).toBeCloseTo(0.2, 6);
    expect(t.data[2]).toBe(1);
  });

  it('rejects a wrong magic, an unknown dtype and a truncated body', () => {
    const bad = reply(DTYPE_FLOAT32, [2], [1, 2]);
    new DataView(bad).setUint8(0, 'X'.charCodeAt(0));
    expect(() => decodeTensor(bad)).toThrow(WireError);
    expect(() => decodeTensor(reply(7, [1], [0]))).toThrow(/dtype 7/);
    expect(() => decodeTensor(reply(DTYPE_FLOAT32, [3], [1, 2, 3]).slice(0, 20))).toThrow(/needs 28 bytes, got 20/);
    expect(() => decodeTensor(new ArrayBuffer(4))).toThrow(/shorter than its header/);
  });
});

describe('typed arrays in JSON', () => {
  it('decodes base64 of little-endian float32 bytes', () => {
    // 1.0f = 00 00 80 3f, -2.0f = 00 00 00 c0 (IEEE 754, little-endian).
    const b64 = bytesToBase64(new Uint8Array([0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0xc0]));
    expect(b64).toBe('AACAPwAAAMA=');
    const t = decodeTypedArray({ shape: [2], dtype: 'float32', data: b64 });
    expect(Array.from(t.data)).toEqual([1, -2]);
  });

  it('checks the byte count against the shape', () => {
    expect(() => decodeTypedArray({ shape: [3], dtype: 'float32', data: 'AACAPwAAAMA=' })).toThrow(/needs 12 bytes/);
  });

  it('round-trips bytes through base64 and slices rows', () => {
    const bytes = new Uint8Array(70000).map((_, i) => (i * 7) & 255);
    expect(Array.from(base64ToBytes(bytesToBase64(bytes)))).toEqual(Array.from(bytes));
    const t = { shape: [2, 3], data: new Float32Array([1, 2, 3, 4, 5, 6]) };
    expect(Array.from(row(t, 1))).toEqual([4, 5, 6]);
  });
});
