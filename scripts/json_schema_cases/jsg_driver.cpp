// Runs llama.cpp's json_schema_to_grammar (the C++ converter) over schemas.
// Input (stdin): one JSON schema per line, or a build_grammar script:
// {"__builder__": [["rule", NAME, BODY] | ["schema", NAME, SCHEMA], ...], "dotall": BOOL}. Output (stdout): one JSON object per line,
// {"ok": true, "grammar": "..."} or {"ok": false, "error": "..."}; stderr gets the
// converter's warnings.
#include "json-schema-to-grammar.h"
#include "json.h"

#include <iostream>
#include <memory>
#include <string>
#include <vector>

static std::string run_builder(const common_json & script) {
    std::vector<std::shared_ptr<common_chat_schema_document>> docs;
    common_grammar_options options;
    options.dotall = script.contains("dotall") && script.at("dotall").get<bool>();
    return build_grammar([&](const common_grammar_builder & builder) {
        for (const auto & op : script.at("__builder__")) {
            const std::string kind = op.at(0).get<std::string>();
            const std::string name = op.at(1).get<std::string>();
            if (kind == "rule") {
                builder.add_rule(name, op.at(2).get<std::string>());
            } else {
                docs.push_back(std::make_shared<common_chat_schema_document>(common_chat_schema_from_json(op.at(2))));
                builder.add_schema(name, *docs.back()->root);
            }
        }
    }, options);
}

int main() {
    std::string line;
    while (std::getline(std::cin, line)) {
        common_json out = common_json::object();
        try {
            common_json in = common_json::parse(line);
            if (in.is_object() && in.contains("__builder__")) {
                out["grammar"] = run_builder(in);
            } else {
                out["grammar"] = json_schema_to_grammar(in, true);
            }
            out["ok"] = true;
        } catch (const std::exception & e) {
            out["ok"] = false;
            out["error"] = std::string(e.what());
        }
        std::cout << out.dump() << std::endl;
    }
    return 0;
}
