// The TypeScript clients of the handshake era: the 1.x SDK (@modelcontextprotocol/sdk, which
// speaks up to 2025-11-25) and the v2 client in its default, older-revision mode. They get a
// pause as an error result, and the service's JSON-RPC errors as JSON-RPC errors (HTTP 200),
// not as a failed transport.
import assert from 'node:assert/strict';
import { Client as ClientV2, ProtocolError } from '@modelcontextprotocol/client';
import { StreamableHTTPClientTransport as TransportV2 } from '@modelcontextprotocol/client';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpError } from '@modelcontextprotocol/sdk/types.js';

import { check, finish, headers, url } from './checks.ts';

const CANT_ANSWER = "This tool paused to ask for human input, and this client can't answer it.";

async function connect(endpoint = url) {
    const client = new Client({ name: 'hitl-ts-sdk1-check', version: '1.0.0' }, { capabilities: { elicitation: {} } });
    const transport = new StreamableHTTPClientTransport(new URL(endpoint), { requestInit: { headers } });
    await client.connect(transport);
    return { client, transport };
}

function rejectsWith(errorClass: Function, code: number) {
    return (error: unknown) => {
        assert.ok(error instanceof errorClass, `expected ${errorClass.name} ${code}, got ${error}`);
        assert.equal((error as any).code, code);
        return true;
    };
}

await check('the 1.x client initializes at 2025-11-25, pings and lists the tools', async () => {
    const { client, transport } = await connect();
    assert.equal(transport.protocolVersion, '2025-11-25');
    assert.ok(client.getServerVersion()?.name);
    assert.deepEqual(await client.ping(), {});
    assert.ok((await client.listTools()).tools.some(tool => tool.name === 'greeter'));
    await client.close();
});

await check('the 1.x client calls a tool that does not pause', async () => {
    const { client } = await connect();
    const result = await client.callTool({ name: 'digital_twin', arguments: { message: 'What do you know?' } });
    assert.equal(result.isError ?? false, false, JSON.stringify(result.content));
    await client.close();
});

await check('a tool that pauses gives the 1.x client an error result with the pending questions', async () => {
    const { client } = await connect();
    const result = (await client.callTool({ name: 'survey', arguments: {} })) as any;
    assert.equal(result.isError, true);
    assert.equal(result.content[0].text, CANT_ANSWER);
    const pending = JSON.parse(result.content[1].text).map((item: { value: string }) => item.value).sort();
    assert.deepEqual(pending, ['What is your favourite colour?', 'What is your name?']);
    await client.close();
});

await check('an unknown tool is a JSON-RPC error -32602 for the 1.x client', async () => {
    const { client } = await connect();
    await assert.rejects(client.callTool({ name: 'no_such_tool', arguments: {} }), rejectsWith(McpError, -32602));
    await client.close();
});

await check('prompts/list and logging/setLevel are JSON-RPC errors -32601 for the 1.x client', async () => {
    const { client } = await connect();
    await assert.rejects(client.listPrompts(), rejectsWith(McpError, -32601));
    await assert.rejects(client.setLoggingLevel('info'), rejectsWith(McpError, -32601));
    await client.close();
});

await check('given /mcp without the slash, the 1.x client follows the 308 to /mcp/', async () => {
    const { client } = await connect(url.replace(/\/$/, ''));
    assert.ok((await client.listTools()).tools.length > 0);
    await client.close();
});

await check('the v2 client in its older-revision mode gets -32602 and -32601 as JSON-RPC errors', async () => {
    const client = new ClientV2({ name: 'hitl-ts-v2-legacy-check', version: '1.0.0' });
    await client.connect(new TransportV2(new URL(url), { requestInit: { headers } }));
    assert.equal(client.getProtocolEra(), 'legacy');
    await assert.rejects(client.callTool({ name: 'no_such_tool', arguments: {} }), rejectsWith(ProtocolError, -32602));
    await assert.rejects(client.setLoggingLevel('info'), rejectsWith(ProtocolError, -32601));
    await client.close();
});

finish();
