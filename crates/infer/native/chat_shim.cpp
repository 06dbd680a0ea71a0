// A C surface over llama.cpp's chat layer (common/chat.h): the model's own
// Jinja template rendered with tools, the grammar and lazy triggers for its
// tool-call syntax, and the parser that reads calls back out of a reply.
//
// Everything crosses as JSON text so that no C++ type leaks into Rust. Every
// entry point catches exceptions and hands back the message instead.

#include "chat.h"
#include "peg-parser.h"

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

namespace {

char * dup(const std::string & s) {
    char * out = static_cast<char *>(std::malloc(s.size() + 1));
    if (out) {
        std::memcpy(out, s.data(), s.size());
        out[s.size()] = '\0';
    }
    return out;
}

void fail(char ** err, const char * what) {
    if (err) {
        *err = dup(what);
    }
}

common_chat_tool_choice tool_choice(const common_json & req) {
    if (!req.contains("tool_choice")) {
        return COMMON_CHAT_TOOL_CHOICE_AUTO;
    }
    return common_chat_tool_choice_parse_oaicompat(std::string(req.at("tool_choice")));
}

}  // namespace

extern "C" {

struct reverie_chat {
    common_chat_templates_ptr tmpls;
};

// The chat template `src` with the model's BOS and EOS texts. (The template
// is read from the model on the Rust side: llama-cpp-2 keeps its model
// pointer to itself.)
reverie_chat * reverie_chat_init(const char * src, const char * bos, const char * eos, char ** err) {
    try {
        auto chat   = std::make_unique<reverie_chat>();
        chat->tmpls = common_chat_templates_init(nullptr, src, bos, eos);
        return chat.release();
    } catch (const std::exception & e) {
        fail(err, e.what());
    } catch (...) {
        fail(err, "unknown error while reading the chat template");
    }
    return nullptr;
}

void reverie_chat_free(reverie_chat * chat) {
    delete chat;
}

// {"source": …, "caps": {…}} of the template used when tools are given.
char * reverie_chat_describe(const reverie_chat * chat, char ** err) {
    try {
        common_json out = common_json::object();
        out["source"]   = common_chat_templates_source(chat->tmpls.get());
        out["explicit"] = common_chat_templates_was_explicit(chat->tmpls.get());
        common_json caps = common_json::object();
        for (const auto & kv : common_chat_templates_get_caps(chat->tmpls.get())) {
            caps[kv.first] = kv.second;
        }
        out["caps"] = caps;
        return dup(out.dump());
    } catch (const std::exception & e) {
        fail(err, e.what());
    }
    return nullptr;
}

// Renders a request ({"messages", "tools", "tool_choice",
// "parallel_tool_calls", "json_schema", "add_generation_prompt",
// "enable_thinking"}, messages and tools in OpenAI's shape) into the prompt
// and the sampling constraints for the reply.
char * reverie_chat_apply(const reverie_chat * chat, const char * request, char ** err) {
    try {
        const auto req = common_json::parse(request);
        common_chat_templates_inputs in;
        in.messages = common_chat_msgs_parse_oaicompat(req.at("messages"));
        if (req.contains("tools") && req.at("tools").is_array() && req.at("tools").size() > 0) {
            in.tools = common_chat_tools_parse_oaicompat(req.at("tools"));
        }
        in.tool_choice = tool_choice(req);
        if (req.contains("parallel_tool_calls")) {
            in.parallel_tool_calls = req.at("parallel_tool_calls").get<bool>();
        }
        if (req.contains("json_schema") && !req.at("json_schema").is_null()) {
            in.json_schema = req.at("json_schema").dump();
        }
        if (req.contains("add_generation_prompt")) {
            in.add_generation_prompt = req.at("add_generation_prompt").get<bool>();
        }
        if (req.contains("enable_thinking")) {
            in.enable_thinking = req.at("enable_thinking").get<bool>();
        }
        in.reasoning_format = COMMON_REASONING_FORMAT_AUTO;
        in.use_jinja        = true;

        const auto p = common_chat_templates_apply(chat->tmpls.get(), in);

        common_json out          = common_json::object();
        out["format"]            = int(p.format);
        out["format_name"]       = common_chat_format_name(p.format);
        out["prompt"]            = p.prompt;
        out["grammar"]           = p.grammar;
        out["grammar_lazy"]      = p.grammar_lazy;
        out["generation_prompt"] = p.generation_prompt;
        out["parser"]            = p.parser;
        out["supports_thinking"] = p.supports_thinking;
        common_json triggers     = common_json::array();
        for (const auto & t : p.grammar_triggers) {
            common_json jt = common_json::object();
            jt["type"]     = int(t.type);
            jt["value"]    = t.value;
            jt["token"]    = int(t.token);
            triggers.push_back(jt);
        }
        out["grammar_triggers"] = triggers;
        out["preserved_tokens"] = p.preserved_tokens;
        out["additional_stops"] = p.additional_stops;
        return dup(out.dump());
    } catch (const std::exception & e) {
        fail(err, e.what());
    } catch (...) {
        fail(err, "unknown error while rendering the chat template");
    }
    return nullptr;
}

// Reads a reply back into {"role", "content", "reasoning_content",
// "tool_calls"} with the parser `reverie_chat_apply` returned
// ({"format", "parser", "generation_prompt"}).
char * reverie_chat_parse(const char * params, const char * text, bool partial, char ** err) {
    try {
        const auto                req = common_json::parse(params);
        common_chat_parser_params pp;
        pp.format            = common_chat_format(req.at("format").get<int>());
        pp.generation_prompt = std::string(req.at("generation_prompt"));
        pp.reasoning_format  = COMMON_REASONING_FORMAT_AUTO;
        pp.parse_tool_calls  = true;
        const std::string parser = req.at("parser");
        if (!parser.empty()) {
            pp.parser.load(parser);
        }
        const auto msg = common_chat_parse(text, partial, pp);
        return dup(msg.to_json_oaicompat().dump());
    } catch (const std::exception & e) {
        fail(err, e.what());
    } catch (...) {
        fail(err, "unknown error while parsing a reply");
    }
    return nullptr;
}

void reverie_chat_string_free(char * s) {
    std::free(s);
}

}  // extern "C"
