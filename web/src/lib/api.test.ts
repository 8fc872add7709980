import { afterEach, describe, expect, it, vi } from 'vitest';
import { ApiClient, MODEL_HEADER } from './api';

/** Records every request and answers `reply` as JSON. */
function stubFetch(reply: unknown) {
  const calls: { url: string; init?: RequestInit }[] = [];
  vi.stubGlobal(
    'fetch',
    vi.fn(async (url: string, init?: RequestInit) => {
      calls.push({ url, init });
      return new Response(JSON.stringify(reply), { status: 200, headers: { 'Content-Type': 'application/json' } });
    }),
  );
  return calls;
}

const header = (init?: RequestInit) => (init?.headers as Record<string, string> | undefined)?.[MODEL_HEADER];

afterEach(() => vi.unstubAllGlobals());

describe('the API client and the models of a server', () => {
  it('sends no model header by default, so that a one-model server answers as before', async () => {
    const calls = stubFetch({ heads: [] });
    const api = new ApiClient();
    await api.link('a b', 1, 0);
    await api.model();
    expect(calls.map((c) => header(c.init))).toEqual([undefined, undefined]);
    expect(api.modelIndex).toBeNull();
  });

  it('asks model k through the Headscope-Model header, with a client (and caches) of its own', async () => {
    const calls = stubFetch({ text: 'x' });
    const api = new ApiClient();
    const second = api.forModel(1);
    expect(api.forModel(1)).toBe(second);
    expect(second.forModel(1)).toBe(second);
    await second.run('x', 'token');
    await second.model();
    await api.run('x', 'token');
    expect(calls.map((c) => header(c.init))).toEqual(['1', '1', undefined]);
    expect((calls[0].init?.headers as Record<string, string>)['Content-Type']).toBe('application/json');
  });

  it('lists the served models', async () => {
    const calls = stubFetch({
      models: [
        { index: 0, model: { name: 'a' } },
        { index: 1, model: { name: 'b' } },
      ],
    });
    const models = await new ApiClient().models();
    expect(models.map((m) => [m.index, m.model.name])).toEqual([
      [0, 'a'],
      [1, 'b'],
    ]);
    expect(calls[0].url).toBe('/api/models');
  });
});
