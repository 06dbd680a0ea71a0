import { memo, useDeferredValue, useRef, useState, type ComponentProps } from "react";
import ReactMarkdown, { type Components } from "react-markdown";
import remarkGfm from "remark-gfm";
import remarkMath from "remark-math";
import rehypeKatex from "rehype-katex";
import rehypeHighlight from "rehype-highlight";
import "katex/dist/katex.min.css";
import { api } from "../ipc";

/**
 * Models write maths as `\[ … \]` and `\( … \)` as often as with dollars;
 * remark-math reads only dollars. Outside code, the first become the
 * second (a display block on lines of its own, as remark-math wants).
 */
export function normalizeMath(text: string): string {
  return text
    .split(/(```[\s\S]*?(?:```|$)|`[^`\n]*`)/)
    .map((part, i) =>
      i % 2 === 1
        ? part
        : part
            .replace(/\\\[([\s\S]*?)\\\]/g, (_, m: string) => `\n\n$$\n${m.trim()}\n$$\n\n`)
            .replace(/\\\(([\s\S]*?)\\\)/g, (_, m: string) => `$${m}$`),
    )
    .join("");
}

/**
 * `text` cut into Markdown blocks at blank lines outside code fences and
 * `$$` maths, so that while a reply streams only its last block is parsed
 * again: the finished ones keep their text and are not re-rendered.
 */
export function splitBlocks(text: string): string[] {
  const blocks: string[] = [];
  let current: string[] = [];
  let fence: string | null = null;
  let maths = false;
  for (const line of text.split("\n")) {
    const trimmed = line.trim();
    const opens = /^(`{3,}|~{3,})/.exec(trimmed);
    if (fence) {
      if (trimmed.startsWith(fence)) fence = null;
    } else if (opens) {
      fence = opens[1];
    } else if (trimmed === "$$") {
      maths = !maths;
    } else if (trimmed === "" && !maths && current.some((l) => l.trim() !== "")) {
      blocks.push(current.join("\n"));
      current = [];
      continue;
    }
    current.push(line);
  }
  if (current.length > 0) blocks.push(current.join("\n"));
  return blocks;
}

/** A code block with a button that copies its text. */
function CodeBlock(props: ComponentProps<"pre">) {
  const pre = useRef<HTMLPreElement>(null);
  const [copied, setCopied] = useState(false);
  const copy = async () => {
    await navigator.clipboard.writeText(pre.current?.innerText ?? "");
    setCopied(true);
    setTimeout(() => setCopied(false), 1500);
  };
  return (
    <div className="code-block">
      <button className="copy" onClick={() => void copy()} aria-label="Copy code">
        {copied ? "Copied" : "Copy"}
      </button>
      <pre ref={pre}>{props.children}</pre>
    </div>
  );
}

/** A link opens in the system's browser, after the person confirms it. */
function Link({ href, children }: ComponentProps<"a">) {
  const open = (e: React.MouseEvent) => {
    e.preventDefault();
    if (href && window.confirm(`Open this link in your browser?\n\n${href}`)) void api.openLink(href);
  };
  return (
    <a href={href} onClick={open} title={href} rel="noreferrer">
      {children}
    </a>
  );
}

const components: Components = { pre: CodeBlock, a: Link };

/**
 * A reply as Markdown (GitHub tables and lists), highlighted code with a
 * copy button, and KaTeX maths. Raw HTML in a reply is never rendered:
 * it shows as text.
 */
export const Markdown = memo(function Markdown({ text }: { text: string }) {
  // While a long reply streams, React may skip parses it has no time for.
  const shown = useDeferredValue(text);
  return (
    <div className="md">
      {splitBlocks(normalizeMath(shown)).map((block, i) => (
        <Block key={i} text={block} />
      ))}
    </div>
  );
});

/** One block of a reply; unchanged blocks are not parsed again. */
const Block = memo(function Block({ text }: { text: string }) {
  return (
    <ReactMarkdown
      remarkPlugins={[remarkGfm, remarkMath]}
      rehypePlugins={[[rehypeKatex, { throwOnError: false }], [rehypeHighlight, { detect: false, ignoreMissing: true }]]}
      components={components}
      skipHtml={false}
    >
      {text}
    </ReactMarkdown>
  );
});
