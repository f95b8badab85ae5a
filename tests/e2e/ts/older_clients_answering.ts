// The TypeScript clients of the handshake era answer a tool's questions when the service runs with
// MCP_OLDER_CLIENTS=answer: the 1.x SDK (@modelcontextprotocol/sdk, 2025-11-25) through its
// elicitation/create handler, every kind of question and every example tool through to the final
// result, and a call whose stream a network cut, resumed with the SDK's own resumption token; the v2 client
// (@modelcontextprotocol/client) in its default, older-revision mode through its handler too.
import assert from 'node:assert/strict';
import { Client as ClientV2, StreamableHTTPClientTransport as TransportV2 } from '@modelcontextprotocol/client';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema, ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import type { ElicitRequest, ElicitResult } from '@modelcontextprotocol/sdk/types.js';

import { check, finish, headers, url } from './checks.ts';

type Answer = ElicitResult | ((params: ElicitRequest['params']) => ElicitResult);

/** A 1.x client whose handler answers each question by a word of its message; `asked` records
 * the questions with their JSON-RPC ids. */
async function connect(answers: Record<string, Answer>, transportOptions: Record<string, unknown> = {}) {
    const client = new Client(
        { name: 'hitl-ts-sdk1-answering', version: '1.0.0' },
        { capabilities: { elicitation: { form: {}, url: {} } } }
    );
    const asked: Array<{ id: string | number; params: ElicitRequest['params'] }> = [];
    client.setRequestHandler(ElicitRequestSchema, async (request, extra) => {
        asked.push({ id: extra.requestId, params: request.params });
        for (const [word, answer] of Object.entries(answers)) {
            if (request.params.message.includes(word)) return typeof answer === 'function' ? answer(request.params) : answer;
        }
        throw new Error(`unexpected question: ${request.params.message}`);
    });
    const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers }, ...transportOptions });
    await client.connect(transport);
    return { client, transport, asked };
}

async function call(answers: Record<string, Answer>, name: string, args: Record<string, unknown> = {}) {
    const { client, transport, asked } = await connect(answers);
    try {
        assert.equal(transport.protocolVersion, '2025-11-25');
        assert.ok(transport.sessionId, 'the service opened no session');
        return { result: (await client.callTool({ name, arguments: args })) as any, asked };
    } finally {
        await client.close();
    }
}

await check('the 1.x client answers a text question through its elicitation handler', async () => {
    const { result, asked } = await call({ region: { action: 'accept', content: { response: 'eu-west-1' } } }, 'choose_region');
    assert.equal(result.isError ?? false, false, JSON.stringify(result.content));
    assert.deepEqual(result.structuredContent, { region: 'eu-west-1' });
    assert.equal(asked.length, 1);
});

await check('the 1.x client answers two questions of one round, asked as two requests', async () => {
    const { result, asked } = await call(
        { name: { action: 'accept', content: { response: 'Ada' } }, colour: { action: 'accept', content: { response: 'green' } } },
        'survey'
    );
    assert.deepEqual(result.structuredContent, { name: 'Ada', colour: 'green' });
    assert.equal(new Set(asked.map(question => question.id)).size, 2);
});

await check('the 1.x client answers a typed form, which keeps its schema', async () => {
    const { result, asked } = await call({ pet: { action: 'accept', content: { name: 'Rex', age: 3 } } }, 'typed_typeddict');
    const schema = (asked[0].params as { requestedSchema: { properties: Record<string, unknown> } }).requestedSchema;
    assert.deepEqual(Object.keys(schema.properties).sort(), ['age', 'name']);
    assert.deepEqual(result.structuredContent, { answer: { name: 'Rex', age: 3 } });
});

await check('the 1.x client answers a URL question asked in URL mode', async () => {
    const { result, asked } = await call({ calendar: { action: 'accept' } }, 'connect_calendar');
    const params = asked[0].params as { mode: string; url: string; elicitationId: string };
    assert.equal(params.mode, 'url');
    assert.equal(params.url, 'https://example.com/oauth/calendar/start');
    assert.equal(params.elicitationId, asked[0].id);
    assert.deepEqual(result.structuredContent, { status: 'connected' });
});

await check('an answer the agent refuses is asked again with the reason, and the second answer finishes the call', async () => {
    const nicknames = ['nobody', 'Ada'];
    const { result, asked } = await call({ nickname: () => ({ action: 'accept', content: { nickname: nicknames.shift()! } }) }, 'typed_validator');
    assert.deepEqual(result.structuredContent, { answer: 'Ada' });
    assert.equal(asked.length, 2);
    assert.match(asked[1].params.message, /nobody is not a nickname/);
    assert.ok(asked[1].params.message.endsWith(asked[0].params.message), asked[1].params.message);
});

await check('a stream cut after its first event is resumed with the resumption token, and the call finishes once', async () => {
    // A network that drops the tools/call's event stream right after its first event (an id, no
    // data): the client is left with that event's id as its resumption token.
    const cutting = async (input: string | URL | Request, init?: RequestInit) => {
        const response = await fetch(input, init);
        const isCall = typeof init?.body === 'string' && init.body.includes('"tools/call"');
        if (!isCall || !response.headers.get('content-type')?.startsWith('text/event-stream')) return response;
        const reader = response.body!.getReader();
        let seen = '';
        const body = new ReadableStream<Uint8Array>({
            async pull(controller) {
                const { value, done } = await reader.read();
                if (done) return controller.close();
                seen += new TextDecoder().decode(value);
                const end = seen.indexOf('\r\n\r\n');
                if (end < 0) return controller.enqueue(value);
                controller.enqueue(new TextEncoder().encode(seen.slice(0, end + 4)));
                await reader.cancel();
                controller.error(new TypeError('network connection lost'));
            }
        });
        return new Response(body, { status: response.status, headers: response.headers });
    };
    const cut = await connect({}, { fetch: cutting, reconnectionOptions: { maxRetries: 0, initialReconnectionDelay: 1, maxReconnectionDelay: 1, reconnectionDelayGrowFactor: 1 } });
    cut.client.onerror = () => {};
    cut.transport.onerror = () => {};
    const tokens: string[] = [];
    const first = cut.client
        .request({ method: 'tools/call', params: { name: 'choose_region', arguments: {} } }, CallToolResultSchema, {
            onresumptiontoken: token => tokens.push(token),
            timeout: 60000
        })
        .catch(error => error);
    for (let waited = 0; tokens.length === 0 && waited < 100; waited++) await new Promise(resolve => setTimeout(resolve, 50));
    assert.equal(tokens.length, 1, `resumption tokens: ${tokens.join(', ')}`);
    assert.equal(cut.asked.length, 0, 'the question arrived before the cut');

    // The same session, from a new client (as after a restart): it resumes the request with the
    // token, gets the question still open, and its answer ends the call.
    const { client, transport, asked } = await connect(
        { region: { action: 'accept', content: { response: 'eu-central-1' } } },
        { sessionId: cut.transport.sessionId }
    );
    transport.setProtocolVersion('2025-11-25');
    const result = (await client.request(
        { method: 'tools/call', params: { name: 'choose_region', arguments: {} } },
        CallToolResultSchema,
        { resumptionToken: tokens[0], timeout: 60000 }
    )) as any;
    assert.deepEqual(result.structuredContent, { region: 'eu-central-1' });
    assert.equal(asked.length, 1);
    // The question replayed is an event of the stream that was cut.
    assert.equal(String(asked[0].id).split('.')[0], tokens[0].split('.')[0]);
    // Resumed once more from the question: the response only, the same one (the call ran once).
    const again = (await client.request(
        { method: 'tools/call', params: { name: 'choose_region', arguments: {} } },
        CallToolResultSchema,
        { resumptionToken: String(asked[0].id), timeout: 60000 }
    )) as any;
    assert.deepEqual(again, result);
    await client.close();
    await cut.client.close();
    assert.ok((await first) instanceof Error, 'the cut request did not end with the cut client');
});

await check('the 1.x client answers every example tool through to its final result', async () => {
    const { client, asked } = await connect({
        send_email: { action: 'accept', content: { decision: 'approve' } },
        calendar: { action: 'accept' },
        'Where should the service deploy': { action: 'accept', content: { region: 'eu-west-1', replicas: 3 } },
        name: params =>
            'name' in ((params as { requestedSchema?: { properties: object } }).requestedSchema?.properties ?? {})
                ? { action: 'accept', content: { name: 'Ada' } }
                : { action: 'accept', content: { response: 'Ada' } },
        colour: { action: 'accept', content: { response: 'green' } },
        region: { action: 'accept', content: { response: 'eu-west-1' } }
    });
    const email = { message: 'Send the launch email' };
    const results: Record<string, any> = {};
    try {
        for (const [key, name, args] of [
            ['greeter', 'greeter', {}],
            ['choose_region', 'choose_region', {}],
            ['plan_deployment', 'plan_deployment', {}],
            ['connect_calendar', 'connect_calendar', {}],
            ['survey', 'survey', {}],
            ['send_email', 'send_email', email],
            ['send_email_per_call', 'send_email_per_call', email],
            ['digital_twin', 'digital_twin', { message: 'What do you know about Django?' }],
            ['handed_to_staff', 'digital_twin', { message: 'Please pass a message to the owner: I would like to hire you.' }],
            ['roll_out', 'roll_out', { version: '1.0' }]
        ] as const) {
            results[key] = await client.callTool({ name, arguments: args });
            assert.equal(results[key].isError ?? false, false, `${key}: ${JSON.stringify(results[key].content)}`);
        }
    } finally {
        await client.close();
    }
    assert.deepEqual(results.greeter.structuredContent, { greeting: 'Hello, Ada!' });
    assert.deepEqual(results.choose_region.structuredContent, { region: 'eu-west-1' });
    assert.deepEqual(results.plan_deployment.structuredContent, { region: 'eu-west-1', replicas: 3 });
    assert.deepEqual(results.connect_calendar.structuredContent, { status: 'connected' });
    assert.deepEqual(results.survey.structuredContent, { name: 'Ada', colour: 'green' });
    assert.deepEqual(results.roll_out.structuredContent.regions, ['us-east-1', 'eu-west-1', 'ap-southeast-2']);
    for (const reviewed of [results.send_email, results.send_email_per_call]) {
        assert.equal(reviewed.structuredContent.answer, 'Done: sent to ada@example.com: Launch');
        assert.deepEqual(reviewed.structuredContent.sent, [{ to: 'ada@example.com', subject: 'Launch' }]);
    }
    assert.match(results.digital_twin.structuredContent.answer, /^Here is what I found: /);
    // The owner-contact message asks the client nothing: the call is handed to staff and ends.
    assert.equal(results.handed_to_staff.structuredContent.status, 'pending');
    assert.equal(asked.length, 8); // survey asks two questions in its round
});

await check('the v2 client in its older-revision mode answers a question through its elicitation handler', async () => {
    const client = new ClientV2({ name: 'hitl-ts-v2-legacy-answering', version: '1.0.0' }, { capabilities: { elicitation: { form: {} } } });
    const asked: string[] = [];
    client.setRequestHandler('elicitation/create', async request => {
        asked.push((request.params as { message: string }).message);
        return { action: 'accept', content: { response: 'us-east-2' } };
    });
    await client.connect(new TransportV2(new URL(url), { requestInit: { headers } }));
    assert.equal(client.getProtocolEra(), 'legacy');
    assert.equal(client.getNegotiatedProtocolVersion(), '2025-11-25');
    const result = await client.callTool({ name: 'choose_region', arguments: {} });
    assert.deepEqual(result.structuredContent, { region: 'us-east-2' });
    assert.equal(asked.length, 1);
    await client.close();
});

finish();
