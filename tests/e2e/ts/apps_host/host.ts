// A web host of MCP Apps for the e2e tests (tests/e2e/test_mcp_app.py), built from the official
// pieces: the TypeScript SDK v2 client speaks to the service, the extension's own AppBridge speaks
// to the App, and the App runs in a sandbox proxy on another origin, as the spec requires of a web
// host ("Sandbox proxy") and as the extension's basic-host example does. esbuild bundles it for
// the browser at test time. What the App sends the host is recorded on `window.harness`.
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import type { CallToolResult } from '@modelcontextprotocol/client';
import {
    AppBridge,
    PostMessageTransport,
    RESOURCE_MIME_TYPE,
    getToolUiResourceUri,
    isToolVisibilityAppOnly
} from '@modelcontextprotocol/ext-apps/app-bridge';

type Recorded = {
    modelTools: string[];
    appOnlyTools: string[];
    resourceUri?: string;
    resource?: { mimeType?: string; csp?: unknown };
    firstResult?: unknown;
    contexts: unknown[];
    messages: unknown[];
    openedLinks: string[];
    appCalls: string[];
    error?: string;
    ready: boolean;
};

const harness: Recorded = { modelTools: [], appOnlyTools: [], contexts: [], messages: [], openedLinks: [], appCalls: [], ready: false };
(window as unknown as { harness: Recorded }).harness = harness;

const query = new URLSearchParams(location.search);
const token = query.get('token') ?? '';
const toolName = query.get('tool') ?? '';
const toolArguments = JSON.parse(query.get('args') ?? '{}') as Record<string, unknown>;
const sandboxUrl = query.get('sandbox') ?? '';

async function main() {
    const client = new Client(
        { name: 'hitl-apps-host', version: '1.0.0' },
        {
            // MCP Apps declared, elicitation not: the App, not the client, asks the person.
            capabilities: { extensions: { 'io.modelcontextprotocol/ui': { mimeTypes: [RESOURCE_MIME_TYPE] } } },
            versionNegotiation: { mode: { pin: '2026-07-28' } }
        }
    );
    await client.connect(
        new StreamableHTTPClientTransport(new URL('/mcp/', location.origin), {
            requestInit: { headers: { Authorization: `Bearer ${token}` } }
        })
    );
    const { tools } = await client.listTools();
    // The host keeps app-only tools from the model (the spec's "Visibility").
    harness.modelTools = tools.filter(tool => !isToolVisibilityAppOnly(tool)).map(tool => tool.name);
    harness.appOnlyTools = tools.filter(tool => isToolVisibilityAppOnly(tool)).map(tool => tool.name);
    const tool = tools.find(t => t.name === toolName);
    if (tool === undefined) throw new Error(`${toolName} is not listed`);
    const uri = getToolUiResourceUri(tool);
    if (uri === undefined) throw new Error(`${toolName} names no App`);
    harness.resourceUri = uri;
    const { contents } = await client.readResource({ uri });
    const resource = contents[0] as { mimeType?: string; text?: string; _meta?: { ui?: { csp?: Record<string, string[]> } } };
    harness.resource = { mimeType: resource.mimeType, csp: resource._meta?.ui?.csp };

    // The call starts while the App loads, as the spec's lifecycle has it.
    const called = client.callTool({ name: toolName, arguments: toolArguments });

    const frame = document.createElement('iframe');
    frame.id = 'app';
    frame.title = 'MCP App';
    frame.setAttribute('sandbox', 'allow-scripts allow-same-origin');
    frame.src = sandboxUrl;
    document.getElementById('conversation')!.append(frame);

    const bridge = new AppBridge(
        client,
        { name: 'hitl-apps-host', version: '1.0.0' },
        { openLinks: {}, serverTools: {}, serverResources: {}, logging: {}, updateModelContext: { text: {}, structuredContent: {} }, message: { text: {} } },
        { hostContext: { theme: 'light', displayMode: 'inline', availableDisplayModes: ['inline'] } }
    );
    bridge.onsandboxready = () => {
        void bridge.sendSandboxResourceReady({ html: resource.text ?? '', csp: resource._meta?.ui?.csp });
    };
    bridge.oninitialized = () => {
        void (async () => {
            await bridge.sendToolInput({ arguments: toolArguments });
            const result = await called;
            harness.firstResult = result;
            await bridge.sendToolResult(result);
            harness.ready = true;
        })().catch(failed);
    };
    bridge.onupdatemodelcontext = async params => {
        harness.contexts.push(params);
        return {};
    };
    bridge.onmessage = async params => {
        harness.messages.push(params);
        return {};
    };
    bridge.onopenlink = async params => {
        harness.openedLinks.push(params.url);
        return {};
    };
    bridge.onsizechange = ({ height }) => {
        if (height !== undefined) frame.style.height = `${height}px`;
    };
    await bridge.connect(new PostMessageTransport(frame.contentWindow!, frame.contentWindow!));
    // connect() set the bridge to forward the App's tools/call to the server; this host records
    // them and refuses a tool whose visibility leaves out "app", as the spec's "Visibility" says.
    bridge.oncalltool = async params => {
        harness.appCalls.push(params.name);
        const listed = tools.find(t => t.name === params.name);
        const visibility = (listed?._meta?.ui as { visibility?: string[] } | undefined)?.visibility ?? ['model', 'app'];
        if (listed === undefined || !visibility.includes('app')) throw new Error(`${params.name} is not callable by the App`);
        return (await client.callTool(params)) as CallToolResult;
    };
}

function failed(error: unknown) {
    harness.error = String((error as Error)?.stack ?? error);
}

main().catch(failed);
