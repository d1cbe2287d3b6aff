"""The structured and cloud-init config types: StructuredConfig,
StructuredDeployment, CloudConfig and MultipartMime, seen through the
stack outputs and the server's derived configs."""
import email

from test_heat_signals import heat, name, resource  # noqa: F401 (heat is a fixture)


def structured_template(validate='LAX', port_input='port'):
    return {
        'heat_template_version': '2018-08-31',
        'resources': {
            'server': {'type': 'OS::Heat::DeployedServer',
                       'properties': {'software_config_transport': 'POLL_SERVER_HEAT'}},
            'config': {'type': 'OS::Heat::StructuredConfig',
                       'properties': {'group': 'ansible', 'config': {
                           'listen': {'get_input': port_input},
                           'hosts': [{'get_input': 'deploy_server_id'}, 'localhost'],
                           'kept': {'get_input': 'port', 'with': 'another key'}}}},
            'deploy': {'type': 'OS::Heat::StructuredDeployment',
                       'properties': {'config': {'get_resource': 'config'}, 'server': {'get_resource': 'server'},
                                      'input_values': {'port': 8080}, 'signal_transport': 'NO_SIGNAL',
                                      'input_values_validate': validate}},
            'cloud': {'type': 'OS::Heat::CloudConfig',
                      'properties': {'cloud_config': {'runcmd': ['ls'], 'package_update': True}}},
            'mime': {'type': 'OS::Heat::MultipartMime',
                     'properties': {'parts': [
                         {'config': {'get_resource': 'cloud'}},
                         {'config': '#!/bin/sh\necho hi\n', 'filename': 'run.sh', 'subtype': 'x-shellscript'}]}},
        },
        'outputs': {
            'cloud': {'value': {'get_attr': ['cloud', 'config']}},
            'mime': {'value': {'get_attr': ['mime', 'config']}},
        },
    }


def test_structured_deployment_substitutes_inputs_and_cloud_init_configs_render(heat):
    n = name('structured')
    sid = heat.create(n, structured_template())
    st = heat.wait(sid, ('CREATE_COMPLETE', 'CREATE_FAILED'), timeout=90)
    assert st['stack_status'] == 'CREATE_COMPLETE', st
    server_id = resource(heat, n, sid, 'server')['physical_resource_id']

    status, _, doc = heat.call('GET', '/software_deployments/metadata/%s' % server_id)
    assert status == 200, doc
    (derived,) = doc['metadata']
    assert derived['group'] == 'ansible'
    assert derived['config'] == {'listen': 8080, 'hosts': [server_id, 'localhost'],
                                 'kept': {'get_input': 'port', 'with': 'another key'}}
    inputs = {i['name']: i['value'] for i in derived['inputs']}
    assert inputs['port'] == 8080 and inputs['deploy_action'] == 'CREATE'

    cloud = heat.output(n, sid, 'cloud')
    assert cloud == '#cloud-config\npackage_update: true\nruncmd:\n- ls\n'
    message = email.message_from_string(heat.output(n, sid, 'mime'))
    assert message.get_content_type() == 'multipart/mixed'
    parts = [(p.get_content_type(), p.get_filename(), p.get_payload()) for p in message.get_payload()]
    assert parts == [('text/plain', None, cloud), ('text/x-shellscript', 'run.sh', '#!/bin/sh\necho hi\n')]

    # STRICT: an input the config asks for and nobody gives fails the deployment.
    strict = name('structured-strict')
    sid2 = heat.create(strict, structured_template(validate='STRICT', port_input='missing'))
    st = heat.wait(sid2, ('CREATE_COMPLETE', 'CREATE_FAILED'), timeout=90)
    assert st['stack_status'] == 'CREATE_FAILED', st
    reason = resource(heat, strict, sid2, 'deploy')['resource_status_reason']
    assert reason == 'UserParameterMissing: resources.deploy: The Parameter (missing) was not provided.', reason

    for stack, ident in ((n, sid), (strict, sid2)):
        heat.delete(stack, ident)
        heat.wait(ident, 'GONE')
