import { describe, expect, it } from "vitest";
import { advantageColour, bytes, duration, percent, prettyJson, signed, stopReason, toolSummary } from "./format";

describe("format", () => {
  it("durations read like a person would say them", () => {
    expect(duration(5.4)).toBe("5 s");
    expect(duration(125)).toBe("2 min 05 s");
    expect(duration(3 * 3600 + 7 * 60)).toBe("3 h 07 min");
    expect(duration(Number.NaN)).toBe("–");
  });
  it("sizes, shares and signs", () => {
    expect(bytes(512)).toBe("512 B");
    expect(bytes(491_400_064)).toBe("491.4 MB");
    expect(percent(0.456)).toBe("46%");
    expect(percent(null)).toBe("–");
    expect(signed(0.25)).toBe("+0.25");
    expect(signed(-1)).toBe("-1.00");
  });
  it("stop reasons say what happened, a normal end says nothing", () => {
    expect(stopReason("end_of_turn")).toBeNull();
    expect(stopReason("context_full")).toContain("new channel");
  });
  it("advantage colours: none at zero, green up, red down, capped", () => {
    expect(advantageColour(0)).toBeUndefined();
    expect(advantageColour(0.5)).toMatch(/^rgba\(46/);
    expect(advantageColour(-3)).toBe("rgba(218, 54, 51, 0.70)");
  });
  it("tool arguments: pretty JSON and a one-line summary", () => {
    expect(prettyJson('{"a":1}')).toBe('{\n  "a": 1\n}');
    expect(prettyJson("not json")).toBe("not json");
    expect(toolSummary("read_file", '{"path":"notes/a.md","offset":3}')).toBe("read_file notes/a.md");
  });
});
