// A tiny runner for the checks of one script: each check prints "ok - <name>" or
// "not ok - <name>" with what went wrong, and the script exits 1 when any failed, so the pytest
// test that runs it shows exactly which check broke and why.
import { inspect } from 'node:util';

export const url = required('MCP_URL');
export const token = required('MCP_TOKEN');
export const headers = { Authorization: `Bearer ${token}` };

const results: boolean[] = [];

export async function check(name: string, body: () => Promise<void>): Promise<void> {
    try {
        await body();
        results.push(true);
        console.log(`ok - ${name}`);
    } catch (error) {
        results.push(false);
        console.log(`not ok - ${name}\n    ${describe(error).replaceAll('\n', '\n    ')}`);
    }
}

export function finish(): never {
    const failed = results.filter(ok => !ok).length;
    console.log(`${results.length - failed} of ${results.length} checks passed`);
    process.exit(failed ? 1 : 0);
}

/** The error's class and message, where in this script it was raised, and what the SDKs attach
 * (the JSON-RPC code and data, an HTTP status, the network error that caused it). */
function describe(error: unknown): string {
    if (!(error instanceof Error)) return inspect(error);
    const here = (error.stack ?? '').split('\n').filter(line => line.includes('/tests/e2e/ts/') && !line.includes('node_modules'));
    const attached = Object.fromEntries(
        ['code', 'data', 'status', 'actual', 'expected'].filter(key => key in error).map(key => [key, (error as any)[key]])
    );
    const lines = [`${error.constructor.name}: ${error.message}`, ...here.slice(0, 2).map(line => line.trim())];
    if (Object.keys(attached).length) lines.push(inspect(attached, { depth: 3, breakLength: 100 }));
    const cause = (error as any).cause ?? (error as any).data?.cause;
    if (cause instanceof Error) lines.push(`caused by ${cause.message}${cause.cause instanceof Error ? `: ${cause.cause.message}` : ''}`);
    return lines.join('\n');
}

function required(name: string): string {
    const value = process.env[name];
    if (!value) {
        console.error(`${name} is not set: this script is run by tests/e2e/test_compatibility.py`);
        process.exit(2);
    }
    return value;
}
