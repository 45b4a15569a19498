// Real clients pointed at `gpuguard door`: the official OpenAI JavaScript
// SDK and the Ollama JavaScript library, run by e2e/door_clients_test.go
// against two instances of model_fake.py: "llm" (models qwen2.5-7b-instruct
// and its alias qwen) and "embed". Each fake answers "NAME:MODEL", so a
// check sees both where the door routed the request and the name the
// server got.
//
// usage: node door_clients.mjs BASE_URL
// Prints "ok NAME" or "FAIL NAME: why" for each check; exits 1 if any failed.
import assert from 'node:assert/strict';
import OpenAI, { NotFoundError } from 'openai';
import { Ollama } from 'ollama';

const base = process.argv[2];
if (!base) {
  console.error('usage: node door_clients.mjs BASE_URL');
  process.exit(64);
}
// No retries: a 5xx must show, not be hidden by the SDK's own retries.
const openai = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 30_000 });
const ollama = new Ollama({ host: base });
const names = ['embed', 'qwen', 'qwen2.5-7b-instruct'];
const messages = [{ role: 'user', content: 'hello' }];

const checks = {
  'openai models.list': async () => {
    const ids = [];
    for await (const m of openai.models.list()) {
      assert.equal(m.object, 'model');
      ids.push(m.id);
    }
    assert.deepEqual(ids, names);
  },
  'openai chat': async () => {
    const r = await openai.chat.completions.create({ model: 'qwen', messages });
    assert.equal(r.choices[0].message.content, 'llm:qwen2.5-7b-instruct');
  },
  'openai chat stream': async () => {
    const stream = await openai.chat.completions.create({ model: 'qwen', messages, stream: true });
    let text = '';
    let chunks = 0;
    for await (const c of stream) {
      text += c.choices[0]?.delta?.content ?? '';
      chunks++;
    }
    assert.equal(text, 'llm:qwen2.5-7b-instruct');
    assert.ok(chunks >= 2, `${chunks} chunks`);
  },
  'openai embeddings': async () => {
    // The SDK asks for base64 and decodes it.
    const r = await openai.embeddings.create({ model: 'embed', input: ['a', 'b'] });
    assert.equal(r.data.length, 2);
    assert.deepEqual(Array.from(r.data[1].embedding), [0.25, -0.5, 1]);
  },
  'openai unknown model': async () => {
    await assert.rejects(
      openai.chat.completions.create({ model: 'gpt-9', messages }),
      (e) => {
        assert.ok(e instanceof NotFoundError, `${e?.constructor?.name}: ${e}`);
        assert.equal(e.status, 404);
        assert.equal(e.code, 'model_not_found');
        assert.equal(e.type, 'invalid_request_error');
        assert.match(e.message, /gpt-9/);
        return true;
      },
    );
  },
  'ollama list': async () => {
    const r = await ollama.list();
    assert.deepEqual(r.models.map((m) => m.name), names);
  },
  'ollama chat': async () => {
    const r = await ollama.chat({ model: 'qwen', messages });
    assert.equal(r.message.content, 'llm:qwen2.5-7b-instruct');
    assert.equal(r.done, true);
  },
  'ollama chat stream': async () => {
    let text = '';
    let parts = 0;
    for await (const p of await ollama.chat({ model: 'qwen', messages, stream: true })) {
      text += p.message.content;
      parts++;
    }
    assert.equal(text, 'llm:qwen2.5-7b-instruct');
    assert.ok(parts >= 2, `${parts} parts`);
  },
  'ollama embed': async () => {
    const r = await ollama.embed({ model: 'embed', input: ['a', 'b'] });
    assert.equal(r.embeddings.length, 2);
    assert.deepEqual(r.embeddings[0], [0.25, -0.5, 1]);
  },
  'ollama unknown model': async () => {
    await assert.rejects(ollama.chat({ model: 'gpt-9', messages }), (e) => {
      assert.equal(e.status_code, 404);
      return true;
    });
  },
};

let failed = 0;
for (const [name, run] of Object.entries(checks)) {
  try {
    await run();
    console.log(`ok ${name}`);
  } catch (e) {
    failed++;
    console.log(`FAIL ${name}: ${e?.stack ?? e}`);
  }
}
process.exit(failed ? 1 : 0);
