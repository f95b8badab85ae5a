// A 2025-11-25 task with the official TypeScript SDK 1.x client (its experimental tasks API), run
// by tests/e2e/test_compatibility.py against a server with MCP_OLDER_CLIENTS=answer: digital_twin's
// message to the owner waits for staff, the client polls the task, and once staff decide it gets
// the agent's answer through tasks/result; the session's own stream (the GET the client opens)
// tells it the task's status as it changes. The line "# waiting for staff" tells the test when the
// client has seen the task wait, so that staff decide then.
import assert from 'node:assert/strict';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema, RELATED_TASK_META_KEY, TaskStatusNotificationSchema } from '@modelcontextprotocol/sdk/types.js';

import { check, finish, headers, url } from './checks.ts';

const HIRE_ME = 'Please pass a message to the owner: I would like to hire you for a Django project.';

await check("a task of digital_twin waits for staff, and tasks/result gives the agent's answer once they decide", async () => {
    const client = new Client({ name: 'hitl-ts-sdk1-tasks', version: '1.0.0' });
    const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
    await client.connect(transport);
    assert.equal(transport.protocolVersion, '2025-11-25');
    assert.deepEqual(client.getServerCapabilities()?.tasks, { list: {}, cancel: {}, requests: { tools: { call: {} } } });
    const tool = (await client.listTools()).tools.find(t => t.name === 'digital_twin');
    assert.equal(tool?.execution?.taskSupport, 'optional');

    let taskId = '';
    const statuses: string[] = [];
    const told: string[] = [];
    client.setNotificationHandler(TaskStatusNotificationSchema, notification => {
        if (notification.params.taskId === taskId) told.push(notification.params.status);
    });
    let result: any;
    const stream = client.experimental.tasks.callToolStream(
        { name: 'digital_twin', arguments: { message: HIRE_ME } },
        CallToolResultSchema,
        { task: { ttl: 60000 }, timeout: 240000 }
    );
    for await (const message of stream) {
        if (message.type === 'taskCreated') taskId = message.task.taskId;
        else if (message.type === 'taskStatus') {
            const status = message.task.statusMessage ?? message.task.status;
            if (status === 'Waiting for staff approval' && !statuses.includes(status)) console.log('# waiting for staff');
            statuses.push(status);
        }
        else if (message.type === 'result') result = message.result;
        else throw message.error;
    }
    assert.ok(taskId, 'no task was created');
    assert.ok(statuses.includes('Waiting for staff approval'), statuses.join(', '));
    assert.match(result.structuredContent.answer, /^Your message was recorded/);
    assert.deepEqual(result._meta[RELATED_TASK_META_KEY], { taskId });

    // notifications/tasks/status on the session's stream: the task's end, told without a request.
    for (let waited = 0; !told.includes('completed') && waited < 15000; waited += 100) {
        await new Promise(resolve => setTimeout(resolve, 100));
    }
    assert.ok(told.includes('completed'), `told on the session's stream: ${told.join(', ')}`);

    const listed = await client.experimental.tasks.listTasks();
    assert.ok(listed.tasks.some(task => task.taskId === taskId && task.status === 'completed'), JSON.stringify(listed));
    await client.close();
});

finish();
