// The TypeScript SDK v2 client (@modelcontextprotocol/client), pinned to 2026-07-28, drives the
// example tools through their rounds with its elicitation handler, as an application would.
import assert from 'node:assert/strict';
import { Client, ProtocolError, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import type { ElicitResult } from '@modelcontextprotocol/client';

import { check, finish, headers, url } from './checks.ts';

const DECLINED = 'The request for input was declined.';
const CANCELLED = 'The request for input was cancelled.';
const EXAMPLES = ['greeter', 'choose_region', 'plan_deployment', 'connect_calendar', 'survey', 'digital_twin'];

type Asked = { message: string; mode?: string; url?: string; requestedSchema?: unknown };

/** A connected client whose handler answers each question by a word of its message, as a
 * person reads the message (not the key); `asked` records the questions. */
async function connect(answers: Record<string, ElicitResult>, endpoint = url) {
    const client = new Client(
        { name: 'hitl-ts-v2-check', version: '1.0.0' },
        { capabilities: { elicitation: { form: {}, url: {} } }, versionNegotiation: { mode: { pin: '2026-07-28' } } }
    );
    const asked: Asked[] = [];
    client.setRequestHandler('elicitation/create', async request => {
        const params = request.params as Asked;
        asked.push(params);
        for (const [word, answer] of Object.entries(answers)) {
            if (params.message.includes(word)) return answer;
        }
        throw new Error(`unexpected question: ${params.message}`);
    });
    await client.connect(new StreamableHTTPClientTransport(new URL(endpoint), { requestInit: { headers } }));
    return { client, asked };
}

async function call(answers: Record<string, ElicitResult>, name: string) {
    const { client, asked } = await connect(answers);
    try {
        return { result: await client.callTool({ name, arguments: {} }), asked };
    } finally {
        await client.close();
    }
}

function text(result: { content?: unknown }): string {
    const [first] = result.content as Array<{ type: string; text: string }>;
    return first.text;
}

await check('it negotiates 2026-07-28 and lists the example tools', async () => {
    const { client } = await connect({});
    assert.equal(client.getNegotiatedProtocolVersion(), '2026-07-28');
    assert.equal(client.getProtocolEra(), 'modern');
    const names = (await client.listTools()).tools.map(tool => tool.name);
    for (const name of EXAMPLES) assert.ok(names.includes(name), `${name} is not listed`);
    await client.close();
});

await check('given /mcp without the slash, it follows the 308 to /mcp/', async () => {
    const { client } = await connect({}, url.replace(/\/$/, ''));
    assert.ok((await client.listTools()).tools.length > 0);
    await client.close();
});

await check('a form question (greeter) is answered by the handler and the tool finishes', async () => {
    const { result, asked } = await call({ name: { action: 'accept', content: { name: 'Ada' } } }, 'greeter');
    assert.deepEqual(result.structuredContent, { greeting: 'Hello, Ada!' });
    assert.equal(asked.length, 1);
    assert.equal(asked[0].mode, 'form');
});

await check('a text question (choose_region) is answered as a one-field form', async () => {
    const { result, asked } = await call({ region: { action: 'accept', content: { response: 'eu-west-1' } } }, 'choose_region');
    assert.deepEqual(result.structuredContent, { region: 'eu-west-1' });
    assert.deepEqual(asked[0].requestedSchema, {
        type: 'object',
        properties: { response: { type: 'string' } },
        required: ['response']
    });
});

await check('two questions of one round (survey) are both asked before the call goes on', async () => {
    const { result, asked } = await call(
        {
            name: { action: 'accept', content: { response: 'Ada' } },
            colour: { action: 'accept', content: { response: 'green' } }
        },
        'survey'
    );
    assert.equal(result.isError ?? false, false, text(result));
    assert.equal(asked.length, 2);
});

await check('a URL question (connect_calendar) is accepted', async () => {
    const { result, asked } = await call({ calendar: { action: 'accept' } }, 'connect_calendar');
    assert.deepEqual(result.structuredContent, { status: 'connected' });
    assert.equal(asked[0].mode, 'url');
    assert.equal(asked[0].url, 'https://example.com/oauth/calendar/start');
});

await check('a URL question (connect_calendar) is declined', async () => {
    const { result } = await call({ calendar: { action: 'decline' } }, 'connect_calendar');
    assert.deepEqual(result.structuredContent, { status: 'not connected' });
});

await check('a URL question (connect_calendar) is cancelled', async () => {
    const { result } = await call({ calendar: { action: 'cancel' } }, 'connect_calendar');
    assert.deepEqual(result.structuredContent, { status: 'not connected' });
});

await check('a declined text question ends the call with an error result', async () => {
    const { result } = await call({ region: { action: 'decline' } }, 'choose_region');
    assert.equal(result.isError, true);
    assert.equal(text(result), DECLINED);
});

await check('a cancelled text question ends the call with an error result', async () => {
    const { result } = await call({ region: { action: 'cancel' } }, 'choose_region');
    assert.equal(result.isError, true);
    assert.equal(text(result), CANCELLED);
});

await check('a typed form answer of the handler that the server refuses reaches the caller as -32602', async () => {
    // The auto-fulfilling driver sends the handler's answer once and hands the refusal over as it
    // is; the caller's next call (here answered correctly) finishes.
    const replicas = [20, 3];
    const answer = (): ElicitResult => ({ action: 'accept', content: { region: 'eu-west-1', replicas: replicas.shift()! } });
    const { client, asked } = await connect({});
    client.setRequestHandler('elicitation/create', async request => {
        asked.push(request.params as Asked);
        return answer();
    });
    await assert.rejects(client.callTool({ name: 'plan_deployment', arguments: {} }), (error: unknown) => {
        assert.ok(error instanceof ProtocolError, `not a ProtocolError: ${error}`);
        assert.equal(error.code, -32602);
        assert.equal(error.message.includes('Form content does not match requestedSchema'), true, error.message);
        return true;
    });
    const done = await client.callTool({ name: 'plan_deployment', arguments: {} });
    assert.deepEqual(done.structuredContent, { region: 'eu-west-1', replicas: 3 });
    assert.equal(asked.length, 2);
    assert.equal(asked[0].message, 'Where should the service deploy?');
    await client.close();
});

await check('a typed form answer the server refuses (-32602) is answered again in the same round', async () => {
    // The refusal is a JSON-RPC error of the retried call, which the auto-fulfilling driver hands
    // to the caller as it is; answering the same round again takes the manual rounds.
    const { client } = await connect({});
    const options = { allowInputRequired: true };
    const first = (await client.callTool({ name: 'plan_deployment', arguments: {} }, options)) as any;
    assert.equal(first.resultType, 'input_required');
    const [key] = Object.keys(first.inputRequests);
    const again = (content: object) =>
        client.callTool(
            {
                name: 'plan_deployment',
                arguments: {},
                inputResponses: { [key]: { action: 'accept', content } },
                requestState: first.requestState
            },
            options
        );
    await assert.rejects(again({ region: 'eu-west-1', replicas: 20 }), (error: unknown) => {
        assert.ok(error instanceof ProtocolError, `not a ProtocolError: ${error}`);
        assert.equal(error.code, -32602);
        assert.equal(error.message.includes('Form content does not match requestedSchema'), true, error.message);
        return true;
    });
    const done = await again({ region: 'eu-west-1', replicas: 3 });
    assert.deepEqual(done.structuredContent, { region: 'eu-west-1', replicas: 3 });
    await client.close();
});

await check("roll_out's progress reaches the caller's onprogress, then the result", async () => {
    const { client } = await connect({});
    const reported: Array<{ progress: number; total?: number; message?: string }> = [];
    const result = (await client.callTool(
        { name: 'roll_out', arguments: { version: '2.4.1' } },
        { onprogress: progress => reported.push(progress) }
    )) as any;
    assert.deepEqual(result.structuredContent.regions, ['us-east-1', 'eu-west-1', 'ap-southeast-2']);
    const numbers = reported.map(progress => progress.progress);
    assert.ok(numbers.length > 0 && numbers.every((n, i) => i === 0 || n > numbers[i - 1]), `not growing: ${numbers}`);
    assert.ok(
        reported.some(progress => progress.total === 3 && progress.message?.startsWith('2.4.1 is live in')),
        JSON.stringify(reported)
    );
    await client.close();
});

finish();
