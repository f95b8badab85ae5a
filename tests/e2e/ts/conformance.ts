// The official MCP conformance suite (@modelcontextprotocol/conformance) runs every one of its
// server scenarios against the service. The suite cannot send an Authorization header, so it
// talks to a small proxy here that adds the bearer token and passes everything else through
// unchanged (the Host and Origin headers included, which the DNS-rebinding scenario varies).
// Scenarios for features the service does not claim are in conformance-baseline.yml.
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { token, url } from './checks.ts';

const here = fileURLToPath(new URL('.', import.meta.url));
const target = new URL(url);

const proxy = http.createServer((request, response) => {
    const upstream = http.request(
        {
            host: target.hostname,
            port: target.port,
            path: request.url,
            method: request.method,
            headers: { ...request.headers, authorization: `Bearer ${token}` }
        },
        answer => {
            response.writeHead(answer.statusCode ?? 502, answer.headers);
            answer.pipe(response);
        }
    );
    upstream.on('error', error => {
        response.writeHead(502, { 'content-type': 'text/plain' });
        response.end(`proxy: ${error.message}`);
    });
    request.pipe(upstream);
});
await new Promise<void>(listening => proxy.listen(0, '127.0.0.1', listening));
const { port } = proxy.address() as AddressInfo;

const results = mkdtempSync(join(tmpdir(), 'conformance-'));
// The CLI runs in a child process so that this one keeps serving the proxy meanwhile.
const cli = await new Promise<number>(done => {
    const args = ['server', '--url', `http://127.0.0.1:${port}${target.pathname}`, '--suite', 'all'];
    args.push('--expected-failures', join(here, 'conformance-baseline.yml'), '--output-dir', results);
    const suite = join(here, 'node_modules/@modelcontextprotocol/conformance/dist/index.js');
    spawn(process.execPath, [suite, ...args], { stdio: 'inherit', env: { ...process.env, NO_COLOR: '1' } }).on(
        'exit',
        code => done(code ?? 1)
    );
});
proxy.close();

if (cli !== 0) {
    // What the checks of each scenario that fails outside the baseline said (the CLI's summary above
    // names them, and any baseline entry that now passes).
    const baseline = readFileSync(join(here, 'conformance-baseline.yml'), 'utf-8');
    const expected = new Set([...baseline.matchAll(/^\s+-\s+(\S+)/gm)].map(match => match[1]));
    for (const run of readdirSync(results).sort()) {
        const scenario = run.replace(/^server-/, '').replace(/-\d{4}-\d{2}-\d{2}T[\d-]+Z$/, '');
        if (expected.has(scenario)) continue;
        const checks = JSON.parse(readFileSync(join(results, run, 'checks.json'), 'utf-8'));
        for (const check of checks.filter((c: { status: string }) => ['FAILURE', 'WARNING'].includes(c.status))) {
            const detail = check.errorMessage ?? JSON.stringify(check.details ?? {});
            console.log(`${scenario}: ${check.id} ${check.status}: ${detail}`);
        }
    }
}
rmSync(results, { recursive: true, force: true });
process.exit(cli);
