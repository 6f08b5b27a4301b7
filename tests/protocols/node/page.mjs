// A minimal AG-UI front end, no framework: @ag-ui/client in a page (bundled by esbuild
// at test time). It sends the text, streams the answer, and shows each interrupt as a
// card whose Approve button resumes the run through the protocol.
import { HttpAgent } from "@ag-ui/client";

const params = new URLSearchParams(location.search);
const agent = new HttpAgent({
  url: params.get("endpoint"),
  headers: { Authorization: `Token ${params.get("token")}` },
});
const transcript = document.querySelector("#transcript");
const cards = document.querySelector("#interrupts");
const status = document.querySelector("#status");

function line(text, className) {
  const item = document.createElement("li");
  item.className = className;
  item.textContent = text;
  transcript.append(item);
  return item;
}

let answer = null;
const subscriber = {
  onTextMessageStartEvent: () => void (answer = line("", "assistant")),
  onTextMessageContentEvent: ({ event }) => void (answer.textContent += event.delta),
  onToolCallStartEvent: ({ event }) => void line(`calls ${event.toolCallName}`, "call"),
  onToolCallResultEvent: ({ event }) => void line(`result: ${event.content}`, "result"),
  onRunFinishedEvent: ({ event }) => void (status.textContent = event.outcome?.type ?? "success"),
  onRunErrorEvent: ({ event }) => void (status.textContent = `error: ${event.message}`),
};

async function run(parameters) {
  status.textContent = "running";
  cards.replaceChildren();
  await agent.runAgent(parameters, subscriber);
  for (const interrupt of agent.pendingInterrupts) {
    const card = document.createElement("section");
    card.className = "interrupt";
    const approve = document.createElement("button");
    approve.textContent = "Approve";
    approve.onclick = () =>
      run({
        resume: [
          {
            interruptId: interrupt.id,
            status: "resolved",
            payload: { approved: true },
            metadata: interrupt.metadata,
          },
        ],
      });
    card.append(interrupt.message, approve);
    cards.append(card);
  }
}

document.querySelector("form").onsubmit = (submitted) => {
  submitted.preventDefault();
  const text = document.querySelector("input").value;
  line(text, "user");
  agent.addMessage({ id: crypto.randomUUID(), role: "user", content: text });
  run({});
};
