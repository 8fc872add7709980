// Decoding the tensors the server sends (format: docs/api.md, tools/server/wire.h).
//
// Binary replies (application/octet-stream):
//   "HST1" | u32 dtype (1 = float32, 2 = uint8 → byte / 255) | u32 rank | rank × u32 shape | values
// all little-endian, values row-major. Small vectors inside JSON replies are
// {shape, dtype: "float32", data: base64 of the little-endian bytes}.

/** A dense row-major float32 tensor: data.length === product(shape). */
export interface Tensor {
  shape: number[];
  data: Float32Array;
}

/** A tensor embedded in a JSON reply. */
export interface TypedArrayJson {
  shape: number[];
  dtype: 'float32';
  data: string;
}

const MAGIC = 'HST1';
export const DTYPE_FLOAT32 = 1;
export const DTYPE_UINT8 = 2;

export class WireError extends Error {}

export function numel(shape: readonly number[]): number {
  return shape.reduce((a, b) => a * b, 1);
}

/** Decodes one binary tensor reply; uint8 payloads are expanded to float32 in [0, 1]. */
export function decodeTensor(buffer: ArrayBuffer): Tensor {
  if (buffer.byteLength < 12)
    throw new WireError(`tensor reply is ${buffer.byteLength} bytes, shorter than its header`);
  const view = new DataView(buffer);
  const magic = String.fromCharCode(view.getUint8(0), view.getUint8(1), view.getUint8(2), view.getUint8(3));
  if (magic !== MAGIC) throw new WireError(`tensor reply starts with "${magic}", expected "${MAGIC}"`);
  const dtype = view.getUint32(4, true);
  const rank = view.getUint32(8, true);
  if (rank > 8) throw new WireError(`tensor rank ${rank} is implausible`);
  const offset = 12 + 4 * rank;
  if (buffer.byteLength < offset) throw new WireError('tensor reply is shorter than its shape');
  const shape: number[] = [];
  for (let i = 0; i < rank; i++) shape.push(view.getUint32(12 + 4 * i, true));
  const n = numel(shape);
  const itemSize = dtype === DTYPE_FLOAT32 ? 4 : dtype === DTYPE_UINT8 ? 1 : 0;
  if (itemSize === 0) throw new WireError(`unknown tensor dtype ${dtype}`);
  if (buffer.byteLength !== offset + n * itemSize)
    throw new WireError(
      `tensor of shape [${shape.join(', ')}] needs ${offset + n * itemSize} bytes, got ${buffer.byteLength}`,
    );
  if (dtype === DTYPE_FLOAT32) return { shape, data: new Float32Array(buffer, offset, n) };
  const bytes = new Uint8Array(buffer, offset, n);
  const data = new Float32Array(n);
  for (let i = 0; i < n; i++) data[i] = bytes[i] / 255;
  return { shape, data };
}

/** Base64 → bytes without relying on Node's Buffer (works in browsers and in Vitest). */
export function base64ToBytes(b64: string): Uint8Array {
  const binary = atob(b64);
  const out = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) out[i] = binary.charCodeAt(i);
  return out;
}

export function bytesToBase64(bytes: Uint8Array): string {
  let binary = '';
  const chunk = 0x8000;
  for (let i = 0; i < bytes.length; i += chunk) binary += String.fromCharCode(...bytes.subarray(i, i + chunk));
  return btoa(binary);
}

/** Decodes {shape, dtype, data} from a JSON reply. */
export function decodeTypedArray(j: TypedArrayJson): Tensor {
  if (j.dtype !== 'float32') throw new WireError(`unsupported dtype ${j.dtype}`);
  const bytes = base64ToBytes(j.data);
  const n = numel(j.shape);
  if (bytes.length !== 4 * n)
    throw new WireError(`array of shape [${j.shape.join(', ')}] needs ${4 * n} bytes, got ${bytes.length}`);
  // A fresh buffer is 4-byte aligned, so the floats can be viewed in place.
  return { shape: j.shape.slice(), data: new Float32Array(bytes.buffer, bytes.byteOffset, n) };
}

/** Row `i` of a rank-2 tensor (a view, no copy). */
export function row(t: Tensor, i: number): Float32Array {
  const cols = t.shape[t.shape.length - 1];
  return t.data.subarray(i * cols, (i + 1) * cols);
}
